"""The wheel installs one top-level package, ragline, with its prompts, and every package of the tree."""

import ast
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


# What a build must never see: setuptools copies into build/lib and never prunes it, so a checkout's
# old build/ would carry a package the configuration leaves out into the wheel, and hide the fault.
NOT_SOURCES = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*cache", ".hypothesis", ".ragline")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    source = tmp_path_factory.mktemp("source") / "ragline"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCES)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(source)],
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


# Every folder with an __init__.py under a mapped directory is a package the wheel must carry: the
# mapping lives in package-dir, and a package missing from the build breaks only installed copies
# (the editable install used by the tests finds it anyway).
def _package_dirs() -> dict[str, Path]:
    return {package: ROOT / folder for package, folder in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"].items()}


def _packages_in_the_tree() -> set[str]:
    found = set()
    for package, folder in _package_dirs().items():
        for init in folder.rglob("__init__.py"):
            relative = init.parent.relative_to(folder).parts
            if "__pycache__" not in relative:
                found.add(".".join((package, *relative)))
    return found


def _packages_in_the_wheel(wheel: zipfile.ZipFile) -> set[str]:
    return {name.removesuffix("/__init__.py").replace("/", ".") for name in wheel.namelist() if name.endswith("/__init__.py")}


def _module_file(module: str) -> Path | None:
    """The source file of a ragline.* module in this checkout, through package-dir (longest prefix wins)."""
    dirs = _package_dirs()
    parts = module.split(".")
    for cut in range(len(parts), 0, -1):
        if (prefix := ".".join(parts[:cut])) in dirs:
            base = dirs[prefix].joinpath(*parts[cut:])
            for candidate in (base / "__init__.py", base.with_suffix(".py")):
                if candidate.is_file():
                    return candidate
            return None
    return None


def _wheel_name(source: Path) -> str:
    """Where a source file lands in the wheel."""
    for package, folder in sorted(_package_dirs().items(), key=lambda item: -len(item[0])):
        if source.is_relative_to(folder):
            return "/".join((*package.split("."), *source.relative_to(folder).parts))
    raise AssertionError(f"{source} is under no mapped folder")


def _ragline_imports(source: Path) -> set[str]:
    """Every ragline.* module a file imports, at the top or lazily inside a function (`from a import b` names a.b too)."""
    names = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in names if name == "ragline" or name.startswith("ragline.")}


def test_the_tree_has_the_packages_the_other_checks_rely_on():
    # a wrong mapping or walk would make the comparisons below vacuous
    assert {"ragline", "ragline.commands", "ragline.api", "ragline.service", "ragline.graph"} <= _packages_in_the_tree()


def test_wheel_has_every_package_folder_of_every_mapped_directory(wheel):
    missing = _packages_in_the_tree() - _packages_in_the_wheel(wheel)
    assert not missing, f"packages left out of the wheel (check setup.py and [tool.setuptools] in pyproject.toml): {sorted(missing)}"


def test_wheel_has_every_file_of_every_mapped_directory(wheel):
    # modules and data alike (prompts, the sample knowledge base, the page's static files, and any
    # subfolder of them): a file in a mapped folder is there to be loaded by the installed package
    names = set(wheel.namelist())
    files = [path for folder in _package_dirs().values() for path in folder.rglob("*")
             if path.is_file() and path.suffix != ".pyc" and not any(part.startswith((".", "__pycache__")) for part in path.relative_to(ROOT).parts)]
    assert ROOT / "ragline" / "sample_kb" / "warranty.txt" in files
    missing = sorted(name for name in map(_wheel_name, files) if name not in names)
    assert not missing, f"files left out of the wheel (check [tool.setuptools.package-data] in pyproject.toml): {missing}"


def test_wheel_has_every_module_the_cli_imports_even_lazily(wheel):
    names = set(wheel.namelist())
    cli = ROOT / "ragline" / "cli.py"
    imported = _ragline_imports(cli)
    assert {"ragline.commands.serve", "ragline.commands.kb"} <= imported  # the lazy `from ragline.commands import ...`
    seen: set[Path] = set()
    todo = [cli]
    while todo:  # and whatever those modules import, down the whole tree of ragline imports
        source = todo.pop()
        if source in seen:
            continue
        seen.add(source)
        assert _wheel_name(source) in names, f"{_wheel_name(source)} is imported by the CLI but not in the wheel"
        todo += [file for module in _ragline_imports(source) if (file := _module_file(module)) is not None]
    assert ROOT / "ragline" / "commands" / "serve.py" in seen


def test_the_cli_runs_from_the_installed_wheel_alone(wheel, tmp_path):
    # the wheel's files on sys.path and the editable install's finder switched off (it would supply any
    # module the wheel lacks from the checkout): the parser imports every command module
    target = tmp_path / "site"
    wheel.extractall(target)
    code = (
        "import sys\n"
        "sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, '__module__', '').startswith('__editable__')]\n"
        "sys.path_hooks[:] = [h for h in sys.path_hooks if not getattr(h, '__module__', '').startswith('__editable__')]\n"
        "sys.path_importer_cache.clear()\n"
        "import ragline, ragline.cli\n"
        f"assert ragline.__file__.startswith({str(target)!r}), ragline.__file__\n"
        "ragline.cli.build_parser()\n"
        "print(sorted(name for name in sys.modules if name.startswith('ragline.commands.')))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(target)}, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "ragline.commands.serve" in result.stdout
