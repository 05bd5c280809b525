"""Layers point down, lazy imports included (the design card's layers, bottom up).

Every import counts: at module level, inside a function, under `TYPE_CHECKING`. A unit is a
top-level package of `package-dir` (contracts/, retrieval/, graph/, ...), and each module of the
`ragline/` root folder on its own (its settings sit at the bottom, its CLI at the top). A unit may
import its own tier and the tiers below; no import cycle joins two units, whatever their tiers.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIR: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]

# Bottom up. The README's Layout section says the same in prose.
TIERS: tuple[frozenset[str], ...] = (
    frozenset({"ragline", "ragline.defaults", "ragline.settings", "ragline.logs", "ragline.plain_errors", "ragline.redis_clients"}),  # configuration (and the namespace with its data: sample_kb/)
    frozenset({"ragline.contracts"}),  # the turn's vocabulary
    frozenset({"ragline.retrieval", "ragline.ingestion", "ragline.citations", "ragline.models", "ragline.entities",
               "ragline.memory", "ragline.web", "ragline.tabular", "ragline.mcp_client", "ragline.checkpoints",
               "ragline.prompts"}),  # knowledge packages
    frozenset({"ragline.services"}),  # the composition root: knowledge and models, built once
    frozenset({"ragline.generation", "ragline.nodes"}),  # stages and their answer helpers
    frozenset({"ragline.graph"}),  # assembly: graphs, cards, routers, the agent loop, Studio's entry
    frozenset({"ragline.service", "ragline.api", "ragline.evaluation", "ragline.agent_tools", "ragline.commands",
               "ragline.cli", "ragline.__main__"}),  # hosts: they own the runs
)
TIER_OF = {unit: tier for tier, units in enumerate(TIERS) for unit in units}


def module_files() -> dict[str, Path]:
    """Every module of the project by its installed name (ragline.graph.turn -> graph/turn.py)."""
    modules: dict[str, Path] = {}
    for package, folder in PACKAGE_DIR.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join([package, *parts])] = path
    return modules


MODULES = module_files()


def unit_of(module: str) -> str:
    """The layer unit a module belongs to: its top-level package, or a root module itself."""
    parts = module.split(".")
    if len(parts) == 1:
        return "ragline"
    unit = f"ragline.{parts[1]}"
    return unit if unit in PACKAGE_DIR or unit in MODULES or unit == "ragline.commands" else "ragline"


def imported_modules(module: str, source: str) -> Iterator[tuple[int, str]]:
    """(line, project module) of every import in `source`, wherever it stands in the file."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's own package, one level up per extra dot
                package = module if MODULES.get(module, Path()).name == "__init__.py" else module.rpartition(".")[0]
                package = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = ".".join(filter(None, [package, node.module]))
            # `from ragline import defaults` imports the module ragline.defaults
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        else:
            continue
        for target in targets:
            if target == "ragline" or target.startswith("ragline."):
                while target not in MODULES and "." in target:
                    target = target.rpartition(".")[0]
                yield node.lineno, target


def unit_imports() -> dict[tuple[str, str], list[str]]:
    """(importing unit, imported unit) -> where, for every import that crosses units."""
    edges: dict[tuple[str, str], list[str]] = {}
    for module, path in MODULES.items():
        for line, target in imported_modules(module, path.read_text(encoding="utf-8")):
            pair = (unit_of(module), unit_of(target))
            if pair[0] != pair[1]:
                edges.setdefault(pair, []).append(f"{path.relative_to(ROOT)}:{line}")
    return edges


def cycles(edges: dict[tuple[str, str], list[str]]) -> list[list[str]]:
    """The strongly connected components of more than one unit (Tarjan)."""
    graph: dict[str, list[str]] = {}
    for source, target in edges:
        graph.setdefault(source, []).append(target)
        graph.setdefault(target, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(unit: str) -> None:
        index[unit] = low[unit] = len(index)
        stack.append(unit)
        for other in graph[unit]:
            if other not in index:
                visit(other)
                low[unit] = min(low[unit], low[other])
            elif other in stack:
                low[unit] = min(low[unit], index[other])
        if low[unit] == index[unit]:
            component = []
            while (member := stack.pop()) != unit:
                component.append(member)
            component.append(unit)
            if len(component) > 1:
                found.append(sorted(component))

    for unit in sorted(graph):
        if unit not in index:
            visit(unit)
    return found


EDGES = unit_imports()


def test_every_package_has_a_place_in_the_layers():
    units = {unit_of(module) for module in MODULES}
    assert sorted(units - TIER_OF.keys()) == []


@pytest.mark.parametrize("tier", range(len(TIERS)), ids=lambda tier: sorted(TIERS[tier])[0])
def test_a_unit_imports_nothing_above_its_tier(tier: int):
    upward = [f"{where} imports {target}" for (source, target), places in sorted(EDGES.items())
              if TIER_OF.get(source) == tier and TIER_OF.get(target, -1) > tier for where in places]
    assert upward == []


def test_no_import_cycle_joins_two_units():
    assert cycles(EDGES) == []


def test_the_contracts_import_nothing_but_configuration():
    reached = {target for (source, target) in EDGES if source == "ragline.contracts"}
    assert reached <= TIERS[0]


def test_an_upward_import_inside_a_function_is_seen():
    """The rule's own check: a lazy import (and one under TYPE_CHECKING) counts like any other."""
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ragline.services import Services\n" \
             "def f():\n    from ragline.graph import graphs\n    return graphs\n"
    found = [unit_of(target) for _, target in imported_modules("ragline.retrieval.example", source)]
    assert found == ["ragline.services", "ragline.graph"]
    assert cycles({("a", "b"): [], ("b", "c"): [], ("c", "a"): [], ("c", "d"): []}) == [["a", "b", "c"]]


READ_SETTINGS_FROM_THE_ROOT = ("nodes", "graph", "generation", "contracts", "retrieval", "ingestion", "citations", "models",
                               "memory", "entities", "web", "tabular", "mcp_client")


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
