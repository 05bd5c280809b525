"""PDFs: pages per chunk, running headers and footers dropped, aligned tables as Markdown tables.
Every PDF is written in the test (tests/ingestion/pdf_fixtures.py) and read by the real parser."""

import pytest

from ragline import defaults
from ragline.ingestion.parsers import parse_bytes
from ragline.ingestion.pdf import drop_running_lines, join_pages, layout_tables
from ragline.retrieval.errors import DocumentTooLargeError
from ragline.retrieval.types import ChunkingConfig
from tests.ingestion.pdf_fixtures import CROSSING_END, CROSSING_START, TABLE, manual_pdf, pdf_pages


def test_each_page_start_points_at_that_pages_text():
    parsed = parse_bytes(manual_pdf(), "pdf", "manual.pdf")
    assert len(parsed.page_starts) == 3
    assert [parsed.text[start:].split("\n")[0] for start in parsed.page_starts] == ["Specifications", "Pairing", CROSSING_END]


def test_a_running_header_and_page_footer_are_dropped():
    text = parse_bytes(manual_pdf(), "pdf", "manual.pdf").text
    assert "Aurora Weather Station Manual" not in text and "Page 2 of 3" not in text
    assert "Batteries are not covered by the warranty." in text


def test_lines_repeated_on_only_some_pages_or_inside_the_page_stay():
    pages = [["Title", "Intro", "Warning: hot", "p1"], ["Title", "Body", "p2"], ["Other", "Warning: hot", "Body", "p3"], ["Title", "End", "p4"]]
    kept = drop_running_lines(pages)
    assert kept == [["Intro", "Warning: hot"], ["Body"], ["Other", "Warning: hot", "Body"], ["End"]]


def test_bare_page_numbers_at_the_foot_of_most_pages_are_dropped():
    pages = [["Intro", "Body one", "1"], ["Body two", "Step 4", "2"], ["Body three", "3"]]
    assert drop_running_lines(pages) == [["Intro", "Body one"], ["Body two", "Step 4"], ["Body three"]]


def test_aligned_lists_and_declarations_are_not_tables():
    bullets = ["•     INTEGER;", "•     ENUMERATED;", "•     BOOLEAN;"]
    numbered = ["1.    Unpack the box", "2.    Mount the mast", "3.    Pair the sensor"]
    fields = ["r        INTEGER,", "s        INTEGER,", "other    OtherStruct"]
    assert layout_tables(bullets) == layout_tables(numbered) == layout_tables(fields) == []


def test_two_pages_keep_every_line():
    pages = [["Title", "One", "Page 1"], ["Title", "Two", "Page 2"]]
    assert drop_running_lines(pages) == pages


def test_an_aligned_table_becomes_a_markdown_table():
    text = parse_bytes(manual_pdf(), "pdf", "manual.pdf").text
    header, rule, *rows = [line for line in text.split("\n") if line.startswith("|")]
    assert header == "| Model | Battery | Battery life |" and rule == "|---|---|---|"
    assert rows[0] == "| Aurora S1 | 2x AA lithium | 18 months |" and len(rows) == len(TABLE) - 1


def test_prose_in_two_columns_and_ragged_rows_stay_text():
    long_left = "The left column of a two-column page runs on"
    two_columns = [[(72, 700 - 14 * i, f"{long_left} {i}"), (320, 700 - 14 * i, f"while the right one says more {i}")] for i in range(5)]
    ragged = [(72, 500, "Name"), (200, 500, "Value"), (72, 484, "alpha"), (200, 484, "1"), (72, 468, "beta"), (72, 452, "gamma"), (200, 452, "3")]
    text = parse_bytes(pdf_pages([[run for row in two_columns for run in row] + ragged]), "pdf", "prose.pdf").text
    assert "|" not in text


def test_layout_rows_need_the_same_columns():
    layout = ["Model      Battery      Life", "S1         AA           18 months", "S2         CR2032       12 months", "", "prose here"]
    assert layout_tables(layout) == [[["Model", "Battery", "Life"], ["S1", "AA", "18 months"], ["S2", "CR2032", "12 months"]]]
    assert layout_tables(layout[:2]) == []  # two aligned lines are not yet a table
    assert layout_tables(["Model      Battery      Life", "S1   AA", "S2         CR2032       12 months"]) == []


def test_a_pdf_with_more_text_than_the_budget_is_refused_not_cut(monkeypatch):
    monkeypatch.setattr(defaults, "DOCUMENT_MAX_TEXT_CHARS", 300)
    with pytest.raises(DocumentTooLargeError, match="300 characters"):
        parse_bytes(manual_pdf(), "pdf", "manual.pdf")


def test_a_page_ending_mid_sentence_runs_on_into_the_next():
    joined = join_pages(["First page ends mid", "sentence here. Done.", "Next page."])
    assert joined.text == "First page ends mid\nsentence here. Done.\n\nNext page."
    assert joined.page_starts == [0, 20, 42]


async def test_an_ingested_pdf_records_pages_per_chunk_and_keeps_its_table_as_chunks(stack, ingestion, tmp_path):
    kb = stack.knowledge_bases.create("manuals", chunking=ChunkingConfig(chunk_size=200, chunk_overlap=0))
    path = tmp_path / "manual.pdf"
    path.write_bytes(manual_pdf())
    document = await ingestion.ingest_file(kb.id, path)
    chunks = stack.catalog.chunks_of(document.id)
    text = stack.catalog.source_text(document.id)
    tables = [c for c in chunks if c.content.startswith("| Model | Battery | Battery life |")]
    assert tables and all(c.metadata["pages"] == [1] for c in tables)
    assert any("| Aurora S1 | 2x AA lithium | 18 months |" in c.content for c in tables)
    crossing = next(c for c in chunks if CROSSING_START in c.content and CROSSING_END in c.content)
    assert crossing.metadata["pages"] == [2, 3]
    for chunk in chunks:
        assert text[chunk.metadata["start"] : chunk.metadata["end"]] == chunk.content
    assert all("Page 1 of 3" not in c.content and "Aurora Weather Station Manual" not in c.content for c in chunks)


async def test_a_reparsed_pdf_keeps_its_pages(stack, ingestion, tmp_path):
    kb = stack.knowledge_bases.create("manuals", chunking=ChunkingConfig(chunk_size=200, chunk_overlap=0))
    path = tmp_path / "manual.pdf"
    path.write_bytes(manual_pdf())
    document = await ingestion.ingest_file(kb.id, path)
    await ingestion.reparse(kb.id, document.id)  # from the stored text: the pages come from the document's metadata
    crossing = next(c for c in stack.catalog.chunks_of(document.id) if CROSSING_START in c.content and CROSSING_END in c.content)
    assert crossing.metadata["pages"] == [2, 3]
