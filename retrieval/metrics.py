"""Ranking metrics over BEIR-style judgments: nDCG@10, Recall@k, MRR@10, MAP.

Graded relevance uses linear gain (as pytrec_eval / BEIR do); a document counts as relevant
when its grade is above zero.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def ndcg_at(ranked: Sequence[str], grades: dict[str, int], k: int = 10) -> float:
    dcg = sum(grades.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranked[:k]))
    ideal = sorted((g for g in grades.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at(ranked: Sequence[str], grades: dict[str, int], k: int) -> float:
    relevant = {d for d, g in grades.items() if g > 0}
    return len(relevant.intersection(ranked[:k])) / len(relevant) if relevant else 0.0


def mrr_at(ranked: Sequence[str], grades: dict[str, int], k: int = 10) -> float:
    for i, doc in enumerate(ranked[:k]):
        if grades.get(doc, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def average_precision(ranked: Sequence[str], grades: dict[str, int]) -> float:
    relevant = {d for d, g in grades.items() if g > 0}
    if not relevant:
        return 0.0
    hits, total = 0, 0.0
    for i, doc in enumerate(ranked):
        if doc in relevant:
            hits += 1
            total += hits / (i + 1)
    return total / len(relevant)


METRICS = ("nDCG@10", "Recall@10", "Recall@100", "MRR@10", "MAP")
MEANINGS = {  # one line each, printed under the table
    "nDCG@10": "ranking quality of the top 10: judged documents near the top score more (0-1)",
    "Recall@10": "share of the judged documents found in the top 10",
    "Recall@100": "share of the judged documents found in the top 100",
    "MRR@10": "1/rank of the first judged document in the top 10, averaged (1 = always first)",
    "MAP": "mean average precision over the whole ranking",
}


def score_run(run: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> dict[str, float]:
    """Mean of every metric over the judged queries of `run` (a query with no results scores 0)."""
    queries = [q for q in qrels if q in run]
    if not queries:
        return {name: 0.0 for name in METRICS}
    sums = dict.fromkeys(METRICS, 0.0)
    for q in queries:
        ranked, grades = run[q], qrels[q]
        sums["nDCG@10"] += ndcg_at(ranked, grades, 10)
        sums["Recall@10"] += recall_at(ranked, grades, 10)
        sums["Recall@100"] += recall_at(ranked, grades, 100)
        sums["MRR@10"] += mrr_at(ranked, grades, 10)
        sums["MAP"] += average_precision(ranked, grades)
    return {name: value / len(queries) for name, value in sums.items()}
