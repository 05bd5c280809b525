import re

from hypothesis import given, settings
from hypothesis import strategies as st

from ragline.ingestion.chunker import (
    chunk_document,
    chunk_text,
    embedding_text,
    split_recursive,
)
from ragline.retrieval.types import ChunkingConfig

WORD = st.text(alphabet=st.characters(categories=("L", "N")), min_size=1, max_size=8)
SEPARATOR = st.sampled_from([" ", " ", "\n", "\n\n", "。", ". ", ", ", "！", "\n\n\n"])


@st.composite
def documents(draw) -> tuple[str, list[str]]:
    """Text made of numbered words (so each is unique) joined by separators of every kind."""
    words = [f"{w}{i}x" for i, w in enumerate(draw(st.lists(WORD, max_size=120)))]
    seps = draw(st.lists(SEPARATOR, min_size=len(words), max_size=len(words)))
    return "".join(w + sep for w, sep in zip(words, seps)), words


@given(documents(), st.integers(32, 600), st.integers(0, 120))
@settings(max_examples=100, deadline=None)
def test_chunks_respect_the_size_keep_order_and_lose_no_word(doc, size, overlap):
    text, words = doc
    chunks = chunk_text(text, size, overlap)
    assert all(len(c.content) <= size for c in chunks)
    assert all(c.content.strip() and c.content in text for c in chunks)
    seen = [w for c in chunks for w in re.findall(r"\w+", c.content)]
    assert set(seen) == set(words)  # words are shorter than any size: none is ever cut
    first_seen = list(dict.fromkeys(seen))
    assert first_seen == words  # chunks follow the document order


def test_empty_and_whitespace_documents_have_no_chunks():
    assert chunk_text("", 512, 80) == []
    assert chunk_text(" \n\n\t \n", 512, 80) == []
    assert chunk_document("", ChunkingConfig(parent_child=True)).chunks == []


def test_a_huge_line_without_separators_is_cut_at_the_size():
    chunks = chunk_text("x" * 2000, 512, 80)
    assert [len(c.content) for c in chunks] == [512, 512, 512, 464]


def test_chinese_text_splits_at_the_full_stop_not_inside_sentences():
    sentence = "长城是中国古代的军事防御工程。"  # 15 characters
    chunks = chunk_text(sentence * 40, 100, 20)
    assert all(c.content.endswith("。") for c in chunks)
    assert all(len(c.content) <= 100 for c in chunks)
    assert chunks[1].content.startswith(sentence)  # the overlap repeats whole sentences


def test_separators_are_tried_in_order_paragraph_line_sentence():
    assert split_recursive("aaaa\n\nbbbb", 6) == ["aaaa\n\n", "bbbb"]
    assert split_recursive("aaaa\nbbbb", 6) == ["aaaa\n", "bbbb"]
    assert split_recursive("First one. Second one.", 12) == ["First one. ", "Second one."]


def test_markdown_table_is_never_split_inside_and_long_tables_repeat_the_header():
    rows = "\n".join(f"| {i} | value number {i} |" for i in range(40))
    text = "# Prices\n\n| id | value |\n|---|---|\n" + rows
    chunks = chunk_text(text, 200, 40)
    for chunk in chunks:
        table_lines = [line for line in chunk.content.split("\n") if line.startswith("|")]
        assert table_lines[:2] == ["| id | value |", "|---|---|"]
        assert all(re.fullmatch(r"\| (\d+|id) \| (value number \d+|value) \||\|---\|---\|", line) for line in table_lines)
    all_rows = [line for c in chunks for line in c.content.split("\n") if "value number" in line]
    assert len(all_rows) == 40  # no row lost, none repeated by the overlap


def test_a_small_table_stays_whole_with_its_heading():
    text = "Intro paragraph.\n\n## Sizes\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nAfter the table."
    chunks = chunk_text(text, 40, 0)
    table = [c for c in chunks if "| a | b |" in c.content]
    assert len(table) == 1 and "| 1 | 2 |" in table[0].content and table[0].content.startswith("## Sizes")


def test_a_table_is_a_chunk_of_its_own_and_the_prose_after_it_is_embedded_as_prose():
    """The sample's specs page: a table, then the battery sentence. Glued together (well within
    512 characters), the sentence was embedded as the table and ranked fifth for its own question."""
    from ragline.ingestion.sample import SAMPLE_DIR

    text = (SAMPLE_DIR / "specs.md").read_text(encoding="utf-8")
    chunks = chunk_text(text, 512, 80)
    assert [c.content.split("\n")[0] for c in chunks] == ["# Technical specifications", "Battery life of the outdoor sensor is about 18 months with lithium AA cells and 12 months with"]
    assert "|" not in chunks[1].content and chunks[1].headings == ["Technical specifications"]
    assert embedding_text(chunks[1].content, chunks[1].headings).startswith("Technical specifications\n\nBattery life")


def test_prose_before_a_table_ends_its_chunk_and_a_heading_right_above_goes_with_the_table():
    text = "Intro paragraph.\n\n## Sizes\n\nSizes in millimetres.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nAfter the table."
    contents = [c.content for c in chunk_text(text, 500, 80)]
    assert contents == ["Intro paragraph.", "## Sizes\n\nSizes in millimetres.", "| a | b |\n|---|---|\n| 1 | 2 |", "After the table."]


def test_code_blocks_and_latex_are_never_split():
    code = "```python\n" + "\n".join(f"print({i})" for i in range(60)) + "\n```"
    latex = "$$\n" + " + ".join(f"x_{i}" for i in range(80)) + "\n$$"
    text = f"Intro.\n\n{code}\n\nMiddle text.\n\n{latex}\n\nEnd."
    chunks = chunk_text(text, 100, 20)
    assert any(c.content == code for c in chunks)
    assert any(c.content == latex for c in chunks)


def test_inline_images_are_not_cut_even_at_spaces():
    image = "![a very long alt text with many words](https://example.com/a/b/c.png)"
    text = ("word " * 15) + image + (" word" * 15)
    chunks = chunk_text(text, 60, 0)
    assert any(image in c.content for c in chunks)


def test_heading_breadcrumbs_travel_with_every_chunk():
    text = "# Guide\n\nIntro.\n\n## Install\n\n" + "Step text. " * 30 + "\n\n### Linux\n\nUse apt.\n\n## Usage\n\nRun it."
    chunks = chunk_text(text, 120, 0)
    assert chunks[0].headings == ["Guide"]
    assert {tuple(c.headings) for c in chunks} == {("Guide",), ("Guide", "Install"), ("Guide", "Install", "Linux"),
                                                  ("Guide", "Usage")}
    linux = next(c for c in chunks if "apt" in c.content)
    assert embedding_text(linux.content, linux.headings).startswith("Guide > Install > Linux\n\n")


def test_parent_child_chunks_point_at_parents_that_contain_them():
    text = "\n\n".join(f"Paragraph {i}. " + "Some filler words here. " * 10 for i in range(30))
    plan = chunk_document(text, ChunkingConfig(parent_child=True, parent_chunk_size=1000, child_chunk_size=200))
    assert len(plan.parents) > 1 and len(plan.chunks) > len(plan.parents)
    for child in plan.chunks:
        assert len(child.content) <= 200
        assert child.content in plan.parents[child.parent_index].content


MARKDOWN_LINE = st.one_of(
    st.text(min_size=0, max_size=300),
    st.builds(lambda cells: "| " + " | ".join(cells) + " |", st.lists(st.text(alphabet="abc 12", max_size=30), min_size=1, max_size=60)),
    st.sampled_from(["```", "$$", "|---|---|", "# Heading", "## " + "h" * 200]),
    st.builds(lambda n: "x" * n, st.integers(0, 5000)),
)


@given(st.lists(MARKDOWN_LINE, max_size=40), st.integers(16, 600), st.integers(0, 120))
@settings(max_examples=150, deadline=None)
def test_no_chunk_exceeds_the_atom_bound_whatever_the_shape(lines, size, overlap):
    from ragline import defaults

    for chunk in chunk_text("\n".join(lines), size, overlap):
        assert len(chunk.content) <= size * defaults.CHUNK_ATOM_MAX_FACTOR


def test_a_csv_row_of_200000_columns_is_cut_into_bounded_chunks_without_losing_a_cell():
    """The hostile probe's 800 KB CSV: one row became one chunk of 2.4 million characters, and the
    local embedder ran on it for over an hour while every hybrid search waited."""
    from ragline import defaults

    header = "| " + " | ".join(f"c{i}" for i in range(200_000)) + " |"
    chunks = chunk_text(header + "\n|" + "---|" * 3 + "\n| 1 | 2 | 3 |", 512, 80)
    assert max(len(c.content) for c in chunks) <= 512 * defaults.CHUNK_ATOM_MAX_FACTOR
    cells = {cell for c in chunks for cell in re.findall(r"c\d+", c.content)}
    assert len(cells) == 200_000
    assert len(chunks) < 2 * len(header) / 512  # packed: many cells a chunk (one cell a chunk made 400,000)


def test_the_documents_title_leads_what_is_embedded_unless_the_chunk_already_starts_with_it():
    assert embedding_text("Use apt.", ["Install", "Linux"], "guide.md") == "guide.md > Install > Linux\n\nUse apt."
    assert embedding_text("Use apt.", [], "guide.md") == "guide.md\n\nUse apt."
    assert embedding_text("Aurora manual\nUse apt.", [], "Aurora manual") == "Aurora manual\nUse apt."
    assert embedding_text("Use apt.", []) == "Use apt."
