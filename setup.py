"""The package list for setuptools; everything else is configured in pyproject.toml.

The folders map under the one `ragline` namespace (`ragline.api` is api/, see package-dir in
pyproject.toml), which setuptools' own `[tool.setuptools.packages.find]` cannot express: it names
what it finds after the folder it searched (`api`, not `ragline.api`). So the packages are found
here, from that same mapping: every folder with an `__init__.py` under a mapped folder ships, and a
new subpackage needs no entry anywhere. Only `packages` comes from here; the data files are
pyproject.toml's package-data. tests/test_packaging.py checks the built wheel against the tree.
"""

import tomllib
from pathlib import Path

from setuptools import find_packages, setup

ROOT = Path(__file__).resolve().parent


def mapped_packages(package_dir: dict[str, str]) -> list[str]:
    """Each mapped package and every package below its folder, named under the mapped name."""
    packages = set()
    for package, folder in package_dir.items():
        packages.add(package)
        packages.update(f"{package}.{sub}" for sub in find_packages(where=str(ROOT / folder)))
    return sorted(packages)


setup(packages=mapped_packages(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]))
