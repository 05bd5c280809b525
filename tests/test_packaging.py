"""The wheel installs one top-level package, ragline, with its prompts."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        check=True,
    )
    return zipfile.ZipFile(next(out.glob("ragline-*.whl")))


def test_wheel_installs_only_the_ragline_namespace(wheel):
    tops = {name.split("/")[0] for name in wheel.namelist() if not name.split("/")[0].endswith((".dist-info", ".data"))}
    assert tops == {"ragline"}


def test_wheel_has_every_mapped_package_and_no_tests(wheel):
    names = set(wheel.namelist())
    for package in ("graph", "nodes", "checkpoints", "api", "prompts", "models", "citations", "retrieval", "ingestion", "web", "entities", "memory", "service"):
        assert f"ragline/{package}/__init__.py" in names
    assert not any(name.startswith(("tests/", "ragline/tests/")) for name in names)


def test_prompt_yaml_files_ship_in_the_wheel(wheel):
    from ragline.prompts import TEMPLATE_FILES

    assert {f"ragline/prompts/{name}.yaml" for name in TEMPLATE_FILES} <= set(wheel.namelist())


def test_modules_import_under_the_ragline_namespace():
    import ragline.graph.studio
    import ragline.nodes.chat_completion_stream

    assert ragline.graph.studio.ragline.name == "ragline"


def test_the_web_page_ships_in_the_wheel(wheel):
    names = set(wheel.namelist())
    assert {"ragline/api/static/index.html", "ragline/api/static/app.js", "ragline/api/static/app.css"} <= names
