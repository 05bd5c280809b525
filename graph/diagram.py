"""The README's picture of the graph, drawn from the compiled graph itself.

`python -m ragline.graph.diagram` rewrites the Mermaid block of README.md between its markers;
`--check` exits non-zero when the README is stale (the test suite runs the same comparison).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from ragline.graph.graphs import build_graph

BEGIN, END = "<!-- graph:ragline:begin -->", "<!-- graph:ragline:end -->"
README = Path(__file__).resolve().parents[1] / "README.md"


def mermaid(name: str = "ragline") -> str:
    return build_graph(name).get_graph(xray=True).draw_mermaid().strip()  # the cards drawn open


def block(name: str = "ragline") -> str:
    return f"{BEGIN}\n```mermaid\n{mermaid(name)}\n```\n{END}"


def with_diagram(readme: str) -> str:
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.DOTALL)
    if not pattern.search(readme):
        raise ValueError(f"README.md has no {BEGIN} ... {END} markers")
    return pattern.sub(lambda _: block(), readme)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="only check that README.md shows the current graph")
    parser.add_argument("--readme", type=Path, default=README)
    args = parser.parse_args(argv)
    current = args.readme.read_text(encoding="utf-8")
    updated = with_diagram(current)
    if args.check:
        if updated != current:
            print(f"{args.readme}: the graph diagram is stale; run python -m ragline.graph.diagram", file=sys.stderr)
            return 1
        return 0
    if updated != current:
        args.readme.write_text(updated, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
