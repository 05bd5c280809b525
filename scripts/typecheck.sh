#!/bin/sh
# Type-check the ragline packages and the benchmarks with mypy (configuration: [tool.mypy] in pyproject.toml).
# The repository maps folders onto ragline.* (graph/ -> ragline.graph, ...); mypy cannot follow the
# editable install's import hook, so the packages are laid out as installed in a temporary link tree.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-"$root/.venv/bin/python"}
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/ragline"
for entry in "$root"/ragline/*; do ln -s "$entry" "$tree/ragline/"; done
"$python" - "$root" "$tree" <<'PY'
import os, sys, tomllib
root, tree = sys.argv[1], sys.argv[2]
mapping = tomllib.load(open(os.path.join(root, "pyproject.toml"), "rb"))["tool"]["setuptools"]["package-dir"]
for package, folder in mapping.items():
    if package != "ragline":
        os.symlink(os.path.join(root, folder), os.path.join(tree, *package.split(".")))
PY
packages=${*:-"ragline"}  # every package: ragline/, graph/, nodes/, service/, retrieval/, models/, ... (pyproject's package-dir)
args=""
for package in $packages; do args="$args -p $package"; done
# The benchmark scripts too (unless packages were named): their wrappers around the service's parts
# implement its Protocols, so a changed interface fails here, not in a benchmark run months later.
# They import each other as top-level modules (benchmarks/ is their sys.path[0]) and tests.* as a package.
ln -s "$root/tests" "$tree/tests"
if [ $# -eq 0 ]; then
  for script in "$root"/benchmarks/*.py; do args="$args -m $(basename "$script" .py)"; done
fi
export MYPYPATH="$root/benchmarks"
cd "$tree"
# shellcheck disable=SC2086
exec "$python" -m mypy --config-file "$root/pyproject.toml" $args
