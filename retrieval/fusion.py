"""Score normalisation and fusion of vector and keyword hit lists.

Replaces knowledgebase_search_fusion.go (deduplicateByScore, weighted RRF) and
searchutil/normalize.go (NormalizeKeywordScores). Every path yields scores in [0,1] (vectors are
cosine similarities), so results of different search calls can be sorted together.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ragline.contracts.passages import MatchType


@dataclass
class Hit:
    """One retriever's hit after normalisation; `score` is already in [0,1]."""

    chunk_id: str
    knowledge_base_id: str
    score: float
    match_type: MatchType


@dataclass
class Fused:
    chunk_id: str
    knowledge_base_id: str
    score: float
    match_type: MatchType
    vector_score: float | None = None
    keyword_score: float | None = None


def normalize_keyword_scores(raw: Sequence[float]) -> list[float]:
    """BM25 scores divided by the best one: the top hit scores 1, the rest keep their proportion.

    Min-max would push the last hit to exactly 0 and let the keyword threshold drop it whatever
    its merit; dividing by the maximum keeps the scale of "how close to the best match".
    """
    top = max(raw, default=0.0)
    return [max(0.0, s) / top if top > 0 else 0.0 for s in raw]


def _side_scores(lists: Sequence[Sequence[Hit]]) -> dict[str, float]:
    best: dict[str, float] = {}
    for hits in lists:
        for hit in hits:
            best[hit.chunk_id] = max(best.get(hit.chunk_id, 0.0), hit.score)
    return best


def deduplicate_by_score(lists: Sequence[Sequence[Hit]]) -> list[Fused]:
    """One retriever: each chunk keeps its best score over all lists."""
    best: dict[str, Hit] = {}
    for hits in lists:
        for hit in hits:
            if hit.chunk_id not in best or hit.score > best[hit.chunk_id].score:
                best[hit.chunk_id] = hit
    out = [
        Fused(h.chunk_id, h.knowledge_base_id, h.score, h.match_type,
              vector_score=h.score if h.match_type == MatchType.VECTOR else None,
              keyword_score=h.score if h.match_type == MatchType.KEYWORD else None)
        for h in best.values()
    ]
    return sorted(out, key=lambda f: -f.score)


def best_ranks(lists: Sequence[Sequence[Hit]]) -> dict[str, int]:
    """1-indexed rank of each chunk inside each list (sorted by score); a chunk keeps its best."""
    ranks: dict[str, int] = {}
    for hits in lists:
        for rank, hit in enumerate(sorted(hits, key=lambda h: -h.score), start=1):
            if rank < ranks.get(hit.chunk_id, 1 << 30):
                ranks[hit.chunk_id] = rank
    return ranks


def weighted_rrf(
    vector_lists: Sequence[Sequence[Hit]], keyword_lists: Sequence[Sequence[Hit]],
    k: int, vector_weight: float, keyword_weight: float,
) -> list[Fused]:
    """score = wv/(k+rank_v) + wk/(k+rank_k), divided by its maximum (wv+wk)/(k+1) into [0,1]."""
    v_rank, k_rank = best_ranks(vector_lists), best_ranks(keyword_lists)
    v_score, k_score = _side_scores(vector_lists), _side_scores(keyword_lists)
    kb_of = {h.chunk_id: h.knowledge_base_id for hits in (*vector_lists, *keyword_lists) for h in hits}
    ceiling = (vector_weight + keyword_weight) / (k + 1) or 1.0
    out: list[Fused] = []
    for chunk_id, kb_id in kb_of.items():
        score = 0.0
        if chunk_id in v_rank:
            score += vector_weight / (k + v_rank[chunk_id])
        if chunk_id in k_rank:
            score += keyword_weight / (k + k_rank[chunk_id])
        both = chunk_id in v_rank and chunk_id in k_rank
        match = MatchType.HYBRID if both else (MatchType.VECTOR if chunk_id in v_rank else MatchType.KEYWORD)
        out.append(Fused(chunk_id, kb_id, min(1.0, round(score / ceiling, 12)), match, v_score.get(chunk_id), k_score.get(chunk_id)))
    # Ties (same fused score) fall back to the vector similarity, then the keyword score.
    return sorted(out, key=lambda f: (-f.score, -(f.vector_score or 0.0), -(f.keyword_score or 0.0)))


def _z_scores(best: dict[str, float], std_floor: float = 0.0) -> dict[str, float]:
    """Each score's distance from the pool's mean in standard deviations, the deviation taken as at
    least `std_floor`: a pool whose scores barely differ has no margins to stretch."""
    if len(best) < 2:
        return dict.fromkeys(best, 0.0)
    mean = sum(best.values()) / len(best)
    std = max(math.sqrt(sum((v - mean) ** 2 for v in best.values()) / len(best)), std_floor)
    return {c: (v - mean) / std if std > 0 else 0.0 for c, v in best.items()}


def weighted_zscore(vector_lists: Sequence[Sequence[Hit]], keyword_lists: Sequence[Sequence[Hit]],
                    vector_weight: float, keyword_weight: float, vector_std_floor: float = 0.0) -> list[Fused]:
    """Distribution-based fusion: each side's scores become z-scores over its candidate pool, the
    weighted sum (a chunk missing from one side adds 0 there) is squashed into (0,1) by a logistic.

    Unlike RRF it keeps how far ahead a hit is, not only its rank; measured on the three shared
    sets it beats every RRF k/weight setting (see benchmarks/retrieval_quality.py).

    The vector side's deviation counts as at least `vector_std_floor`: cosine similarities of one
    long document's chunks differ by hundredths (a man page: 0.85-0.90), and stretching such
    differences into z-scores of 2-3 let vector noise outvote a keyword hit the question names
    exactly (real documents: keyword rank 2 and 3 fell to 5 and 10; see ragline.defaults).
    """
    v_score, k_score = _side_scores(vector_lists), _side_scores(keyword_lists)
    v_z, k_z = _z_scores(v_score, vector_std_floor), _z_scores(k_score)
    kb_of = {h.chunk_id: h.knowledge_base_id for hits in (*vector_lists, *keyword_lists) for h in hits}
    out: list[Fused] = []
    for chunk_id, kb_id in kb_of.items():
        raw = vector_weight * v_z.get(chunk_id, 0.0) + keyword_weight * k_z.get(chunk_id, 0.0)
        both = chunk_id in v_score and chunk_id in k_score
        match = MatchType.HYBRID if both else (MatchType.VECTOR if chunk_id in v_score else MatchType.KEYWORD)
        out.append(Fused(chunk_id, kb_id, 1.0 / (1.0 + math.exp(-raw)), match, v_score.get(chunk_id), k_score.get(chunk_id)))
    return sorted(out, key=lambda f: (-f.score, -(f.vector_score or 0.0), -(f.keyword_score or 0.0)))


def fuse(vector_lists: Sequence[Sequence[Hit]], keyword_lists: Sequence[Sequence[Hit]], k: int,
         vector_weight: float, keyword_weight: float, method: str = "rrf", vector_std_floor: float = 0.0) -> list[Fused]:
    """Both retrievers answered -> weighted RRF (or z-score fusion); only one -> best score per chunk."""
    has_vector = any(len(h) for h in vector_lists)
    has_keyword = any(len(h) for h in keyword_lists)
    if has_vector and has_keyword:
        if method == "zscore":
            return weighted_zscore(vector_lists, keyword_lists, vector_weight, keyword_weight, vector_std_floor)
        return weighted_rrf(vector_lists, keyword_lists, k, vector_weight, keyword_weight)
    return deduplicate_by_score([*vector_lists, *keyword_lists])
