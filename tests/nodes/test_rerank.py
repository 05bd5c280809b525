import pytest
from hypothesis import given
from hypothesis import strategies as st
from ragline.graph.context import RunContext
from ragline.graph.request import PipelineRequest, SearchTarget
from ragline.models.rerank import RerankError, RerankScore
from ragline.nodes.rerank import is_scoped, rerank
from ragline.retrieval.reranking import (
    Scored,
    apply_faq_boost,
    clean_passage,
    composite_score,
    enriched_passage,
    filter_by_threshold,
    select_mmr,
    with_composite,
)
from ragline.retrieval.types import ChunkType

from ragline.services import Services
from tests.nodes.results import hit


def _scored(*scores):
    return [Scored(hit(f"c{i}"), s) for i, s in enumerate(scores)]


def test_code_fences_are_stripped_but_code_text_is_kept():
    assert clean_passage("```python\nprint('hi')\n```") == "print('hi')"


def test_formula_fences_keep_the_formula():
    assert clean_passage("$$E = mc^2$$") == "E = mc^2"


def test_markup_is_removed_and_link_text_kept():
    text = "# Title\n> quoted **bold** [the docs](http://x.y) ![img](a.png) <b>tag</b> see https://example.com\n\n\n- item"
    assert clean_passage(text) == "Title\nquoted bold the docs  tag see \nitem"


def test_table_separators_go_and_rows_are_joined_with_commas():
    assert clean_passage("| a | b |\n|---|---|\n| 1 | 2 |") == "a, b\n1, 2"


def test_enrichment_adds_captions_and_generated_questions_without_duplicates():
    result = hit("c1", "Main text.", metadata={"images": [{"caption": "A chart", "ocr_text": "Main text."}], "generated_questions": ["What is it?", "A chart"]})
    assert enriched_passage(result) == "Main text.\nA chart\nWhat is it?"


def test_passages_are_cut_to_the_length_limit():
    assert len(enriched_passage(hit("c1", "x" * 100), max_chars=10)) == 10


def test_results_at_or_above_threshold_pass():
    assert [s.model_score for s in filter_by_threshold(_scored(0.9, 0.4, 0.6), 0.5, 0.15)] == [0.9, 0.6]


def test_rerank_keeps_top1_when_all_below_threshold():
    assert [s.model_score for s in filter_by_threshold(_scored(0.2, 0.1), 0.3, 0.15)] == [0.2]


def test_top1_below_the_fallback_minimum_is_not_kept():
    assert filter_by_threshold(_scored(0.1, 0.05), 0.3, 0.15) == []


def test_scoped_search_keeps_its_top1_whatever_its_score():
    assert [s.model_score for s in filter_by_threshold(_scored(0.01), 0.3, 0.0)] == [0.01]


def test_nothing_passing_a_high_threshold_retries_once_at_seventy_percent():
    assert [s.model_score for s in filter_by_threshold(_scored(0.6, 0.58, 0.1), 0.8, 0.15)] == [0.6, 0.58]


def test_the_lowered_threshold_never_goes_below_0_3():
    # threshold 0.4 -> 0.28 would pass 0.29; the floor of 0.3 does not, so only the top-1 fallback applies
    assert [s.model_score for s in filter_by_threshold(_scored(0.29, 0.2), 0.4, 0.15)] == [0.29]


def test_composite_is_0_6_model_0_3_base_0_1_source():
    assert composite_score(0.5, 0.8, web=False) == pytest.approx(0.6 * 0.5 + 0.3 * 0.8 + 0.1)
    assert composite_score(0.5, 0.8, web=True) == pytest.approx(0.6 * 0.5 + 0.3 * 0.8 + 0.1 * 0.95)


@given(st.floats(0, 1), st.floats(0, 1), st.booleans())
def test_composite_stays_in_the_unit_interval(model, base, web):
    assert 0.0 <= composite_score(model, base, web) <= 1.0


def test_scores_are_recorded_in_metadata():
    result = with_composite(Scored(hit("c1", score=0.4), 0.9))
    assert result.metadata["base_score"] == 0.4 and result.metadata["model_score"] == 0.9
    assert result.score == result.metadata["composite_score"]


def test_graph_hits_use_the_model_score_as_their_base():
    result = with_composite(Scored(hit("g1", score=0.0, metadata={"source": "graph"}), 0.8))
    assert result.metadata["base_score"] == 0.8


def test_faq_boost_is_not_capped_at_one():
    boosted = apply_faq_boost([hit("f1", score=0.9, chunk_type=ChunkType.FAQ), hit("d1", score=0.9)], 1.5)
    assert boosted[0].score == pytest.approx(1.35) and boosted[0].metadata["faq_boosted"]
    assert boosted[1].score == 0.9


def test_mmr_prefers_a_diverse_passage_over_a_near_duplicate():
    results = [hit("a", "solar panel battery charge", 0.9), hit("b", "solar panel battery charge", 0.88), hit("c", "wind speed sensor", 0.7)]
    assert [r.id for r in select_mmr(results, 2)] == ["a", "c"]


def test_mmr_with_k_1_picks_the_most_relevant():
    assert [r.id for r in select_mmr([hit("a", score=0.2), hit("b", score=0.9)], 1)] == ["b"]


def test_mmr_keeps_input_order_on_ties():
    results = [hit(f"r{i}", f"unique{i}", 0.5) for i in range(5)]
    assert [r.id for r in select_mmr(results, 5)] == [f"r{i}" for i in range(5)]


@given(st.lists(st.tuples(st.text(alphabet="abc ", max_size=12), st.floats(0, 1)), max_size=12), st.integers(0, 14))
def test_mmr_returns_k_distinct_results_from_the_input(items, k):
    results = [hit(f"r{i}", text or "x", score) for i, (text, score) in enumerate(items)]
    chosen = select_mmr(results, k)
    assert len(chosen) == min(k, len(results)) and len({r.id for r in chosen}) == len(chosen)


def test_explicit_documents_or_tags_make_a_scoped_search():
    assert is_scoped(PipelineRequest(query="q", knowledge_ids=["d"]))
    assert is_scoped(PipelineRequest(query="q", search_targets=[SearchTarget(knowledge_base_id="kb", tag_ids=("t",))]))
    assert not is_scoped(PipelineRequest(query="q", knowledge_base_ids=["kb"]))


class _Reranker:
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
        self.context = RunContext(services=_Services(reranker))


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
