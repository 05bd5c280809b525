"""Layers point down: the service packages never import the graph, its nodes, the hosting
service or the HTTP API, not even lazily inside a function (the guide's layer rule)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LOWER = ("retrieval", "ingestion", "citations", "models", "memory", "entities", "web", "tabular", "mcp_client")
UPPER = ("ragline.graph", "ragline.nodes", "ragline.service", "ragline.api")


def _imports(path: Path) -> list[tuple[int, str]]:
    names: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append((node.lineno, node.module))
    return names


@pytest.mark.parametrize("package", LOWER)
def test_a_service_package_imports_nothing_above_it(package):
    upward = [f"{path.relative_to(ROOT)}:{line} imports {name}"
              for path in sorted((ROOT / package).rglob("*.py"))
              for line, name in _imports(path) if name == "ragline.services" or name.startswith(UPPER)]
    assert upward == []


READ_SETTINGS_FROM_THE_ROOT = ("nodes", "graph", "generation", *LOWER)


def _process_settings_reads(path: Path) -> list[int]:
    """Lines importing `get_settings`: the process-wide settings, which a root built from other settings would not govern."""
    return [node.lineno for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.ImportFrom) and node.module == "ragline.settings" and any(a.name == "get_settings" for a in node.names)]


@pytest.mark.parametrize("package", READ_SETTINGS_FROM_THE_ROOT)
def test_stages_and_models_take_their_settings_from_the_root_never_the_process(package):
    """One root (issue 29): a node or model reads the settings of the Services it was given, so two
    roots in one process (a parent graph's and ours, or two test services) each govern their own."""
    reads = [f"{path.relative_to(ROOT)}:{line}" for path in sorted((ROOT / package).rglob("*.py")) for line in _process_settings_reads(path)]
    assert reads == []
