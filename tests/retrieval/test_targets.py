"""The retrieval service's search over targets, called without a graph (as the benchmarks do)."""

from __future__ import annotations

from ragline.contracts.access import Principal
from ragline.contracts.passages import SearchTarget
from ragline.contracts.request import PipelineRequest
from ragline.ingestion.service import TextDocument
from ragline.nodes.chunk_search import target_search
from ragline.retrieval.targets import TargetSearch, search_targets


async def _kb(stack, ingestion):
    kb = stack.knowledge_bases.create("targets-kb")
    await ingestion.ingest_documents(kb.id, [
        TextDocument(text="The outdoor sensor battery lasts eighteen months with lithium cells.", title="battery", source="battery"),
        TextDocument(text="Pairing takes up to three minutes after holding the SENSOR button.", title="pairing", source="pairing"),
        TextDocument(text="The display shows the temperature in Celsius or Fahrenheit.", title="display", source="display"),
    ])
    return [SearchTarget(knowledge_base_id=kb.id)]


async def test_a_question_finds_its_passage_and_an_off_topic_one_finds_nothing(stack, ingestion):
    targets = await _kb(stack, ingestion)
    found = await search_targets(stack, "How long does the outdoor sensor battery last?", Principal("default", "default"), targets)
    assert found and found[0].knowledge_title == "battery" and "relevance" in found[0].metadata
    assert await search_targets(stack, "What is the capital of France?", Principal("default", "default"), targets) == []


async def test_without_the_gate_the_off_topic_question_keeps_its_hits(stack, ingestion):
    targets = await _kb(stack, ingestion)
    hits = await search_targets(stack, "What is the capital of France?", Principal("default", "default"), targets,
                                TargetSearch(relevance_gate=False, vector_threshold=0.0, keyword_threshold=0.0))
    assert hits and all("relevance" not in hit.metadata for hit in hits)


def test_the_search_defaults_are_the_requests_and_every_request_number_reaches_it():
    assert target_search(PipelineRequest(query="q")) == TargetSearch()
    request = PipelineRequest(query="q", embedding_top_k=7, rerank_top_k=3, vector_threshold=0.4, keyword_threshold=0.2,
                              query_expansion_enabled=False, relevance_gate_enabled=False)
    assert target_search(request) == TargetSearch(embedding_top_k=7, rerank_top_k=3, vector_threshold=0.4, keyword_threshold=0.2,
                                                  query_expansion=False, relevance_gate=False)
