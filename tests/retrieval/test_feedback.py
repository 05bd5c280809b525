"""Pseudo-relevance feedback on the vector side of hybrid search (Rocchio)."""

import numpy as np
import pytest

from ragline.contracts.passages import MatchType
from ragline.retrieval.feedback import feedback_chunks, rocchio
from ragline.retrieval.fusion import Fused
from ragline.retrieval.hybrid import StoreEngines
from ragline.retrieval.types import SearchParams
from tests.retrieval.test_hybrid import RecordingVectorStore, fill


def test_rocchio_adds_beta_times_the_feedback_mean_and_keeps_unit_length():
    q, d1, d2 = np.eye(3)
    moved = np.asarray(rocchio(q, [d1, d2], 0.5))
    expected = q + 0.5 * (d1 + d2) / 2
    np.testing.assert_allclose(moved, expected / np.linalg.norm(expected))
    assert rocchio(q, [], 0.5) == list(q) and rocchio(q, [d1], 0.0) == list(q)


def test_feedback_comes_from_the_best_document_hits_only():
    fused = [Fused("f1", "faq", 0.9, MatchType.VECTOR), Fused("a", "docs", 0.8, MatchType.HYBRID),
             Fused("b", "docs", 0.7, MatchType.KEYWORD), Fused("c", "docs", 0.6, MatchType.VECTOR)]
    assert [f.chunk_id for f in feedback_chunks(fused, {"docs"}, 2)] == ["a", "b"]
    assert feedback_chunks(fused, {"docs"}, 0) == []


@pytest.fixture
def recorder(stack):
    recorder = RecordingVectorStore(stack.stores["default"].vector)
    stack.stores["default"] = StoreEngines(recorder, stack.stores["default"].keyword)
    stack.searcher.stores = stack.stores
    return recorder


async def test_hybrid_searches_the_vector_side_again_with_the_refined_query(stack, ingestion, recorder):
    kb = await fill(stack, ingestion)
    params = SearchParams(query="How tall is the Eiffel Tower?", knowledge_base_ids=[kb.id], disable_recall_thresholds=True)
    results = await stack.searcher.search(params)
    assert len(recorder.depths) == 2 and results[0].knowledge_title == "eiffel"
    recorder.depths.clear()
    await stack.searcher.search(params.model_copy(update={"disable_keyword": True}))
    assert len(recorder.depths) == 1  # one retriever: nothing to fuse, no feedback


async def test_feedback_off_searches_each_side_once(stack, ingestion, recorder):
    kb = await fill(stack, ingestion)
    stack.searcher.settings = stack.searcher.settings.model_copy(update={"feedback_docs": 0})
    await stack.searcher.search(SearchParams(query="How tall is the Eiffel Tower?", knowledge_base_ids=[kb.id]))
    assert len(recorder.depths) == 1
