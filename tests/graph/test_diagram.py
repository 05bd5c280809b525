"""The README shows the graph as it is compiled today."""

from ragline.graph.diagram import README, block, main, with_diagram


def test_the_readme_diagram_is_the_compiled_graph():
    assert main(["--check"]) == 0, "README.md is stale: run python -m ragline.graph.diagram"


def test_a_changed_graph_makes_the_check_fail(tmp_path):
    stale = tmp_path / "README.md"
    stale.write_text(README.read_text(encoding="utf-8").replace("rerank -.->", "rerank -->"), encoding="utf-8")
    fresh = tmp_path / "FRESH.md"
    fresh.write_text(with_diagram(stale.read_text(encoding="utf-8")), encoding="utf-8")
    assert block() in fresh.read_text(encoding="utf-8")
    assert main(["--check", "--readme", str(fresh)]) == 0
    lines = fresh.read_text(encoding="utf-8").splitlines(keepends=True)
    edited = "".join(line for line in lines if "wiki_boost -.-> knowledge_search\\3aweb_fetch;" not in line)
    assert len(edited) < len("".join(lines))
    stale.write_text(edited, encoding="utf-8")
    assert main(["--check", "--readme", str(stale)]) == 1
