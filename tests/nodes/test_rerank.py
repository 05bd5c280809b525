import pytest

from ragline.contracts.context import RunContext, RunHost
from ragline.contracts.passages import ChunkType, SearchTarget
from ragline.contracts.request import PipelineRequest
from ragline.models.rerank import RerankError, RerankScore
from ragline.nodes.rerank import is_scoped, rerank
from ragline.retrieval.reranking import (
    Scored,
)
from ragline.services import Services
from tests.nodes.helpers import node_runtime
from tests.nodes.results import hit


def _scored(*scores):
    return [Scored(hit(f"c{i}"), s) for i, s in enumerate(scores)]


def test_explicit_documents_or_tags_make_a_scoped_search():
    assert is_scoped(PipelineRequest(query="q", knowledge_ids=["d"]))
    assert is_scoped(PipelineRequest(query="q", search_targets=[SearchTarget(knowledge_base_id="kb", tag_ids=("t",))]))
    assert not is_scoped(PipelineRequest(query="q", knowledge_base_ids=["kb"]))


class _Reranker:
    model = "cohere/rerank-english-v3.0"

    def __init__(self, scores=None, error=None):
        self.scores, self.error = scores, error

    async def rerank(self, query, documents):
        if self.error:
            raise self.error
        return [RerankScore(i, s) for i, s in enumerate(self.scores)]


class _Services(Services):
    def __init__(self, reranker):
        super().__init__()
        self._reranker = reranker

    def reranker(self, model):
        return self._reranker


class _Runtime:
    def __init__(self, reranker):
        self.context = RunContext(host=RunHost(services=_Services(reranker)))


def _state(**request):
    results = [hit("a", "alpha text", 0.9), hit("b", "beta text", 0.5), hit("c", "gamma text", 0.3)]
    return {"request": PipelineRequest(query="q", knowledge_base_ids=["kb"], **request), "search_results": results}


async def test_without_a_rerank_model_results_pass_through_with_composite_scores():
    update = await rerank(_state(), _Runtime(None))
    assert [r.id for r in update["rerank_results"]] == ["a", "b", "c"]
    assert all("composite_score" in r.metadata for r in update["rerank_results"])


async def test_a_failing_rerank_model_falls_back_to_search_results():
    update = await rerank(_state(), _Runtime(_Reranker(error=RerankError("timed out after 60s"))))
    assert [r.id for r in update["rerank_results"]] == ["a", "b", "c"]


async def test_rerank_model_scores_reorder_and_filter():
    update = await rerank(_state(rerank_threshold=0.5), _Runtime(_Reranker([0.1, 0.9, 0.6])))
    assert [r.id for r in update["rerank_results"]] == ["b", "c"]
    assert update["rerank_results"][0].metadata["model_score"] == 0.9


async def test_rerank_keeps_at_most_rerank_top_k():
    update = await rerank(_state(rerank_top_k=1), _Runtime(None))
    assert len(update["rerank_results"]) == 1


def _below_threshold_state(**request):
    """Three hits the rerank model will score far below the default threshold of 0.3."""
    results = [hit("a", "alpha text", 0.9), hit("b", "beta text", 0.5), hit("c", "gamma text", 0.3)]
    return {"request": PipelineRequest(query="q", **request), "search_results": results}


async def test_a_scoped_search_keeps_its_top1_even_at_a_model_score_of_0_05():
    update = await rerank(_below_threshold_state(knowledge_ids=("doc",)), node_runtime(_Services(_Reranker([0.04, 0.05, 0.03]))))
    assert [r.id for r in update["rerank_results"]] == ["b"]
    assert update["rerank_results"][0].metadata["model_score"] == 0.05


async def test_an_unscoped_search_drops_a_top1_below_0_15():
    update = await rerank(_below_threshold_state(knowledge_base_ids=("kb",)), node_runtime(_Services(_Reranker([0.04, 0.05, 0.03]))))
    assert update["rerank_results"] == []


async def test_an_unscoped_search_keeps_a_top1_of_exactly_0_15_but_not_0_14():
    kept = await rerank(_below_threshold_state(knowledge_base_ids=("kb",)), node_runtime(_Services(_Reranker([0.1, 0.15, 0.03]))))
    assert [r.id for r in kept["rerank_results"]] == ["b"]
    dropped = await rerank(_below_threshold_state(knowledge_base_ids=("kb",)), node_runtime(_Services(_Reranker([0.1, 0.14, 0.03]))))
    assert dropped["rerank_results"] == []


def _faq_state(faq_priority_enabled):
    results = [hit("text", "how to reset the hub by holding its button", 0.85),
               hit("faq", "Q: reset? A: unplug the hub for ten seconds", 0.8, chunk_type=ChunkType.FAQ)]
    request = PipelineRequest(query="reset the hub", knowledge_base_ids=("kb",), faq_priority_enabled=faq_priority_enabled)
    return {"request": request, "search_results": results}


async def test_with_faq_priority_a_faq_hit_slightly_below_a_text_hit_ranks_first():
    update = await rerank(_faq_state(True), node_runtime(_Services(None)))
    assert [r.id for r in update["rerank_results"]] == ["faq", "text"]
    faq = update["rerank_results"][0]
    assert faq.score == pytest.approx((0.6 * 0.8 + 0.3 * 0.8 + 0.1) * 1.2) and faq.metadata["faq_boosted"]


async def test_without_faq_priority_the_text_hit_stays_first():
    update = await rerank(_faq_state(False), node_runtime(_Services(None)))
    assert [r.id for r in update["rerank_results"]] == ["text", "faq"]
    assert "faq_boosted" not in update["rerank_results"][1].metadata
