"""A picture found only by its image vector goes through the stages: chunk_search recalls it (the
relevance gate lets it by: it has no words), rerank keeps it, chunk_merge chains it to its passage."""

from __future__ import annotations

from ragline.contracts.context import RunContext, RunHost
from ragline.contracts.passages import ChunkType, MatchType
from ragline.contracts.request import PipelineRequest
from ragline.contracts.state import TurnIds
from ragline.nodes.chunk_merge import chunk_merge
from ragline.nodes.chunk_search import chunk_search
from ragline.nodes.chunk_search_parallel import chunk_search_parallel
from ragline.nodes.rerank import rerank
from ragline.services import Services
from tests.image_vectors import QUESTION, image_kb


class _Runtime:
    def __init__(self, services: Services) -> None:
        self.context = RunContext(tenant_id="default", host=RunHost(services=services))


async def test_an_image_vector_hit_reaches_merge_with_its_passage(tmp_path, scripted_model):
    kb = await image_kb(tmp_path, scripted_model, image_similarity=0.3)
    runtime = _Runtime(Services(retrieval_factory=lambda: kb.stack))
    state = {"request": PipelineRequest(query=QUESTION, knowledge_base_ids=[kb.kb_id]), "turn": TurnIds("s", "r", "u", "a"), "history": []}
    state["search_targets"] = (await chunk_search_parallel(state, runtime))["search_targets"]
    state["search_results"] = (await chunk_search(state, runtime))["search_results"]
    assert [r.match_type for r in state["search_results"]] == [MatchType.IMAGE_VECTOR]
    state["rerank_results"] = (await rerank(state, runtime))["rerank_results"]
    [merged] = (await chunk_merge(state, runtime))["merge_results"]
    assert merged.chunk_type == ChunkType.IMAGE_VECTOR
    assert "wind vane points north" in merged.content and kb.image.url in merged.content  # the passage, its image linked
