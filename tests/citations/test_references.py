"""The references event payload: the full merged list, whether citations are on or off."""

from __future__ import annotations

from ragline.citations import build_references, references_payload


def test_references_carry_every_result_in_merged_order(results):
    references = build_references(results)
    assert [r.chunk_id for r in references] == [r.chunk_id for r in results]


def test_references_keep_what_the_front_end_links_by(results, ids):
    guide, _, faq, web = build_references(results)
    assert (guide.chunk_id, guide.knowledge_id, guide.knowledge_base_id) == (
        ids.guide_chunk,
        ids.guide_knowledge,
        ids.knowledge_base,
    )
    assert faq.chunk_type == "faq" and faq.score == 1.1
    assert web.source == "web_search" and web.url == ids.web_url


def test_references_are_not_reordered_by_faq_priority_or_deduplicated(results):
    doubled = [*results, results[0]]
    assert [r.chunk_type for r in build_references(doubled)] == ["text", "text", "faq", "web_search", "text"]


def test_references_payload_is_json_ready(results):
    payload = references_payload(results)
    assert payload[0]["chunk_id"] == results[0].chunk_id
    assert payload[3]["source"] == "web_search"
    assert set(payload[0]) >= {"chunk_id", "knowledge_id", "knowledge_base_id", "title", "content", "score"}


def test_a_reference_carries_its_chunks_location_and_a_web_page_none():
    from ragline.citations.sources import SourceChunk

    passage = SourceChunk(chunk_id="c1", content="Forty seconds.", metadata={"headings": ["Guide", "Pairing"], "pages": [2, 3], "start": 420, "end": 560})
    older = SourceChunk(chunk_id="c2", content="Stored before locations.")
    page = SourceChunk(chunk_id="https://example.com/a", source="web_search", metadata={"start": 0, "end": 5})
    located, unknown, web = references_payload([passage, older, page])
    assert located["location"] == {"pages": [2, 3], "headings": ["Guide", "Pairing"], "start": 420, "end": 560}
    assert unknown["location"] is None and web["location"] is None
