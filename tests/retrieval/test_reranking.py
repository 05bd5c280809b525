"""Rerank threshold rules and MMR (seed: rerank.go, internal/reranking SelectMMR), called directly."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragline.contracts.passages import ChunkType
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
from tests.nodes.results import hit

NO_TOP1_FALLBACK = 1.01  # no model score reaches it: isolates the threshold and retry rules


def _scored(*scores):
    return [Scored(hit(f"c{i}", score=0.5), s) for i, s in enumerate(scores)]


def _kept(scored, threshold, keep_top1_min=NO_TOP1_FALLBACK):
    return [s.model_score for s in filter_by_threshold(scored, threshold, keep_top1_min)]


def test_rerank_retries_at_threshold_times_0_7_when_that_is_above_0_3():
    # 0.5 * 0.7 = 0.35: 0.35 passes the retry, 0.34 does not
    assert _kept(_scored(0.36, 0.35, 0.34), 0.5) == [0.36, 0.35]


def test_rerank_retries_at_threshold_times_0_7_but_never_below_0_3():
    # 0.4 * 0.7 = 0.28 is raised to the floor 0.3: 0.3 passes the retry, 0.29 does not
    assert _kept(_scored(0.31, 0.3, 0.29), 0.4) == [0.31, 0.3]


def test_a_threshold_just_above_0_3_still_retries_at_the_floor():
    assert _kept(_scored(0.3, 0.29), 0.31) == [0.3]


def test_a_threshold_of_0_3_is_not_lowered():
    assert _kept(_scored(0.29, 0.21), 0.3) == []


@given(st.lists(st.floats(0, 1), max_size=8), st.floats(0, 0.3), st.floats(0, 1))
def test_a_threshold_at_or_below_0_3_is_never_lowered(fractions, threshold, keep_top1_min):
    """Only the threshold itself, then the top-1 fallback, decide (no retry at threshold*0.7).

    Scores are drawn at or below the threshold, where a retry would find what the first pass missed.
    """
    scores = [threshold * f for f in fractions]
    ranked = sorted(scores, reverse=True)
    expected = [s for s in ranked if s >= threshold]
    if not expected and ranked and ranked[0] >= keep_top1_min:
        expected = ranked[:1]
    assert _kept(_scored(*scores), threshold, keep_top1_min) == expected


def test_the_top1_fallback_applies_only_after_the_retry_found_nothing():
    assert _kept(_scored(0.29, 0.2), 0.4, keep_top1_min=0.15) == [0.29]
    assert _kept(_scored(0.29, 0.2), 0.4, keep_top1_min=0.3) == []


def _mmr_candidates():
    """a is chosen first; the second pick trades relevance against Jaccard redundancy with a.

    mmr = λ·score − (1−λ)·J(x, a), J(b, a) = 3/10, J(c, a) = 0, J(d, a) = 8/10:
      λ=0.5: b 0.225, c 0.250, d 0.075 -> c
      λ=0.7: b 0.435, c 0.350, d 0.425 -> b   (b wins for 6/11 < λ < 5/7)
      λ=0.9: b 0.645, c 0.450, d 0.775 -> d
    """
    words = [f"w{i}" for i in range(10)]
    return [
        hit("a", " ".join(words), 1.0),
        hit("b", " ".join(words[:3]), 0.75),
        hit("c", "unrelated passage about something else", 0.5),
        hit("d", " ".join(words[:8]), 0.95),
    ]


def test_mmr_trades_relevance_against_redundancy_with_lambda_0_7():
    assert [r.id for r in select_mmr(_mmr_candidates(), 2)] == ["a", "b"]


def test_the_mmr_example_picks_differently_at_lambda_0_5_and_0_9():
    assert [r.id for r in select_mmr(_mmr_candidates(), 2, lam=0.5)] == ["a", "c"]
    assert [r.id for r in select_mmr(_mmr_candidates(), 2, lam=0.9)] == ["a", "d"]


# --- moved from tests/nodes/test_rerank.py: the pure functions of retrieval/reranking.py ---


def _scored_hits(*scores):
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
    assert [s.model_score for s in filter_by_threshold(_scored_hits(0.9, 0.4, 0.6), 0.5, 0.15)] == [0.9, 0.6]


def test_rerank_keeps_top1_when_all_below_threshold():
    assert [s.model_score for s in filter_by_threshold(_scored_hits(0.2, 0.1), 0.3, 0.15)] == [0.2]


def test_top1_below_the_fallback_minimum_is_not_kept():
    assert filter_by_threshold(_scored_hits(0.1, 0.05), 0.3, 0.15) == []


def test_scoped_search_keeps_its_top1_whatever_its_score():
    assert [s.model_score for s in filter_by_threshold(_scored_hits(0.01), 0.3, 0.0)] == [0.01]


def test_nothing_passing_a_high_threshold_retries_once_at_seventy_percent():
    assert [s.model_score for s in filter_by_threshold(_scored_hits(0.6, 0.58, 0.1), 0.8, 0.15)] == [0.6, 0.58]


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
