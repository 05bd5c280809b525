import math

from ragline.retrieval.metrics import (
    average_precision,
    mrr_at,
    ndcg_at,
    recall_at,
    score_run,
)


def test_ndcg_uses_linear_graded_gain():
    grades = {"a": 3, "b": 1}
    ranked = ["b", "x", "a"]
    dcg = 1 / math.log2(2) + 3 / math.log2(4)
    idcg = 3 / math.log2(2) + 1 / math.log2(3)
    assert abs(ndcg_at(ranked, grades) - dcg / idcg) < 1e-12


def test_recall_mrr_and_average_precision():
    grades = {"a": 1, "b": 1}
    ranked = ["x", "a", "y", "b"]
    assert recall_at(ranked, grades, 2) == 0.5
    assert mrr_at(ranked, grades) == 0.5
    assert average_precision(ranked, grades) == (1 / 2 + 2 / 4) / 2


def test_a_query_without_results_scores_zero():
    scores = score_run({"q1": [], "q2": ["a"]}, {"q1": {"a": 1}, "q2": {"a": 1}})
    assert scores["nDCG@10"] == 0.5 and scores["MAP"] == 0.5
