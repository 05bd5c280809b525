"""The image-vector chain through the compiled graph (issue 14): with a multimodal embedding model,
ingestion stores the chart's own vector in the KB's image space; a question only the picture
answers recalls it by that vector (chunk_search), the text reranker turns it down and the image rule
keeps it (kept_by=image_vector), merge step 4 chains it to its page's passage, and the vision
answering model sees the stored chart and cites the image hit."""

from __future__ import annotations

import base64
import re

from ragline.checkpoints.savers import memory_saver
from ragline.contracts.context import RunContext, RunHost
from ragline.contracts.events import ResponseType
from ragline.contracts.passages import ChunkType
from ragline.contracts.request import PipelineRequest
from ragline.graph.graphs import build_graph
from ragline.graph.turn import stream_turn
from tests.image_chain import CHART_PNG, image_chain_services, image_chain_settings, report_pdf, script_chain_vectors
from tests.image_vectors import QUESTION
from tests.scripted_model import Reply
from tests.vector_rows import vector_row_count


def image_urls(message: dict) -> list[str]:
    content = message["content"]
    return [p["image_url"]["url"] for p in content if p.get("type") == "image_url"] if isinstance(content, list) else []


async def test_a_picture_found_by_its_own_vector_is_kept_merged_shown_and_cited(tmp_path, scripted_model):
    script_chain_vectors(scripted_model)
    core = image_chain_services(tmp_path, image_chain_settings(scripted_model, tmp_path), scripted_model)
    kb = core.retrieval.knowledge_bases.create("station", "default")
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(report_pdf())
    knowledge = await core.ingestion.ingest_file(kb.id, pdf)
    [image_chunk] = [c for c in core.retrieval.catalog.chunks_of(knowledge.id) if c.chunk_type == ChunkType.IMAGE_VECTOR]
    space = core.images.space(kb.id)
    assert space is not None and vector_row_count(core.retrieval.stores["default"].vector, space) == 1  # stored at ingestion

    scripted_model.on(lambda body: True, Reply(chunks=["The chart shows monthly bars", ' <ref id="c1"/>', "."]))
    request = PipelineRequest(query=QUESTION, knowledge_base_ids=[kb.id], rewrite_enabled=False)
    graph = build_graph("ragline", checkpointer=memory_saver())
    events = [e async for e in stream_turn(graph, request, RunContext(session_id="s-image", host=RunHost(services=core)))]

    [references] = [e.knowledge_references for e in events if e.response_type == ResponseType.REFERENCES]
    first = references[0]
    assert (first["chunk_id"], first["chunk_type"], first["match_type"]) == (image_chunk.id, "image_vector", "image_vector")
    assert first["metadata"]["kept_by"] == "image_vector"  # the text reranker turned it down; the rule kept it
    assert "wind vane points north" in first["content"]  # merge step 4: the image chained to its page's passage
    [rerank] = scripted_model.rerank_requests
    assert rerank["query"] == QUESTION

    answer_request = scripted_model.requests[-1]
    assert image_urls(answer_request["messages"][-1]) == ["data:image/png;base64," + base64.b64encode(CHART_PNG).decode()]
    answer = "".join(e.content or "" for e in events if e.response_type == ResponseType.ANSWER)
    assert re.search(rf'<kb [^>]*chunk_id="{image_chunk.id}"', answer), answer


async def test_with_a_vision_reranker_the_picture_is_kept_by_its_own_score(tmp_path, scripted_model):
    script_chain_vectors(scripted_model)
    settings = image_chain_settings(scripted_model, tmp_path, rerank_model="jina_ai/scripted-rerank-m0", rerank_sees_images=True)
    core = image_chain_services(tmp_path, settings, scripted_model)
    kb = core.retrieval.knowledge_bases.create("station", "default")
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(report_pdf())
    await core.ingestion.ingest_file(kb.id, pdf)
    scripted_model.on_rerank(Reply(rank=lambda query, document: 0.9 if isinstance(document, dict) and "image" in document else 0.0))
    scripted_model.on(lambda body: True, Reply.text("Monthly bars."))
    request = PipelineRequest(query=QUESTION, knowledge_base_ids=[kb.id], rewrite_enabled=False)
    graph = build_graph("ragline", checkpointer=memory_saver())
    events = [e async for e in stream_turn(graph, request, RunContext(session_id="s-vision-rerank", host=RunHost(services=core)))]

    [rerank] = scripted_model.rerank_requests
    assert rerank["documents"] == [{"image": base64.b64encode(CHART_PNG).decode()}]  # the picture, not its words
    [references] = [e.knowledge_references for e in events if e.response_type == ResponseType.REFERENCES]
    assert references[0]["chunk_type"] == "image_vector"
    assert references[0]["metadata"]["scored_by"] == "image" and "kept_by" not in references[0]["metadata"]
