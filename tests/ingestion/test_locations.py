"""Each chunk's offsets in its document's text (and its pages): found for every shape the chunker
makes, never guessed when the text is not there."""

from ragline.ingestion.chunker import chunk_document, chunk_text
from ragline.ingestion.locations import locate_chunks, location_metadata, pages_of
from ragline.retrieval.types import ChunkingConfig

GUIDE = """# Guide

## Install

Mount the mast two metres above the ground. Point the solar panel south.

| Part | Count |
|---|---|
| Mast | 1 |
| Screw | 4 |
| Bracket | 2 |
| Cable tie | 6 |

## Pairing

Hold the pair button for three seconds. The light blinks green when the sensor is found.
"""


def spans_cover(text, contents):
    return [text[s:e] for s, e in locate_chunks(text, contents)]


def test_every_chunk_of_a_markdown_document_is_found_at_its_place():
    drafts = chunk_text(GUIDE, 60, 10)
    spans = locate_chunks(GUIDE, [d.content for d in drafts])
    assert None not in spans and [s for s, _ in spans] == sorted(s for s, _ in spans)
    for draft, (start, end) in zip(drafts, spans):
        if not draft.content.startswith("| Part"):
            assert GUIDE[start:end] == draft.content


def test_a_later_part_of_a_long_table_starts_at_its_own_first_row():
    drafts = [d for d in chunk_text(GUIDE, 40, 0) if d.content.startswith("| Part")]
    assert len(drafts) > 1  # the table was cut, each part repeating the header
    spans = locate_chunks(GUIDE, [d.content for d in drafts])
    assert GUIDE[spans[0][0] :].startswith("| Part | Count |")
    for draft, (start, end) in zip(drafts[1:], spans[1:]):
        first_row = draft.content.split("\n")[2]
        assert GUIDE[start:end].startswith(first_row) and GUIDE[start:end].endswith(draft.content.split("\n")[-1])


def test_windows_line_ends_still_place_every_chunk():
    text = GUIDE.replace("\n", "\r\n")
    drafts = chunk_text(text, 60, 10)
    spans = locate_chunks(text, [d.content for d in drafts])
    assert None not in spans
    assert text[spans[-1][0] : spans[-1][1]].replace("\r\n", "\n") == drafts[-1].content


def test_parents_and_children_are_each_found():
    plan = chunk_document(GUIDE, ChunkingConfig(parent_child=True, parent_chunk_size=120, child_chunk_size=40, chunk_overlap=0))
    for drafts in (plan.parents, plan.chunks):
        assert None not in locate_chunks(GUIDE, [d.content for d in drafts])


def test_text_that_is_not_in_the_document_gets_no_offsets():
    mast, panel = GUIDE.index("Mount the mast"), GUIDE.index("Point the solar panel")
    assert locate_chunks(GUIDE, ["Mount the mast", "This sentence is nowhere.", "Point the solar panel"]) == [(mast, mast + 14), None,
                                                                                                          (panel, panel + 21)]


def test_a_span_names_every_page_it_touches():
    starts = [0, 100, 250]
    assert pages_of((10, 90), starts) == [1]
    assert pages_of((90, 120), starts) == [1, 2]
    assert pages_of((100, 250), starts) == [2]  # ends where page 3 begins
    assert pages_of((240, 400), starts) == [2, 3]
    assert pages_of((5, 9), []) == []


def test_the_metadata_records_headings_offsets_and_pages():
    assert location_metadata(["Guide", "Install"], (90, 120), [0, 100]) == {"headings": ["Guide", "Install"], "start": 90, "end": 120,
                                                                           "pages": [1, 2]}
    assert location_metadata(["Guide"], None, [0, 100]) == {"headings": ["Guide"]}
