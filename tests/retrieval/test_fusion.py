from ragline.retrieval.fusion import (
    Hit,
    deduplicate_by_score,
    fuse,
    normalize_keyword_scores,
    weighted_rrf,
)
from ragline.retrieval.types import MatchType

V, K = MatchType.VECTOR, MatchType.KEYWORD


def hits(kind: MatchType, *pairs: tuple[str, float]) -> list[Hit]:
    return [Hit(cid, "kb", score, kind) for cid, score in pairs]


def test_rrf_is_weighted_sum_of_reciprocal_ranks_divided_by_its_maximum():
    vector = hits(V, ("a", 0.9), ("b", 0.8))
    keyword = hits(K, ("b", 1.0), ("c", 0.5))
    fused = {f.chunk_id: f for f in weighted_rrf([vector], [keyword], k=60, vector_weight=0.7, keyword_weight=0.3)}
    ceiling = 1.0 / 61
    assert abs(fused["a"].score - (0.7 / 61) / ceiling) < 1e-12
    assert abs(fused["b"].score - (0.7 / 62 + 0.3 / 61) / ceiling) < 1e-12
    assert abs(fused["c"].score - (0.3 / 62) / ceiling) < 1e-12
    assert fused["b"].match_type == MatchType.HYBRID and fused["a"].match_type == MatchType.VECTOR


def test_rrf_gives_one_to_a_chunk_ranked_first_by_both_retrievers():
    fused = weighted_rrf([hits(V, ("a", 0.4))], [hits(K, ("a", 0.2))], k=60, vector_weight=0.7, keyword_weight=0.3)
    assert fused[0].score == 1.0


def test_rrf_takes_each_chunks_best_rank_over_several_lists():
    first = hits(V, ("x", 0.9), ("a", 0.8))
    second = hits(V, ("a", 0.7))
    fused = {f.chunk_id: f.score for f in weighted_rrf([first, second], [hits(K, ("z", 1.0))], 60, 0.7, 0.3)}
    assert fused["a"] == fused["x"]  # rank 1 in the second list counts, not rank 2 in the first


def test_one_retriever_keeps_the_best_score_per_chunk():
    fused = deduplicate_by_score([hits(V, ("a", 0.6), ("b", 0.9)), hits(V, ("a", 0.95))])
    assert [(f.chunk_id, f.score) for f in fused] == [("a", 0.95), ("b", 0.9)]


def test_fuse_uses_rrf_only_when_both_retrievers_returned_hits():
    only_vector = fuse([hits(V, ("a", 0.83))], [[]], 60, 0.7, 0.3)
    assert only_vector[0].score == 0.83
    both = fuse([hits(V, ("a", 0.83))], [hits(K, ("a", 1.0))], 60, 0.7, 0.3)
    assert both[0].score == 1.0


def test_keyword_scores_are_divided_by_the_best_score():
    assert normalize_keyword_scores([8.0, 4.0, 2.0]) == [1.0, 0.5, 0.25]
    assert normalize_keyword_scores([]) == []
    assert normalize_keyword_scores([0.0]) == [0.0]


def test_zscore_fusion_weights_each_sides_standard_scores_and_squashes_into_0_1():
    import math

    from ragline.retrieval.fusion import weighted_zscore

    vector = hits(V, ("a", 0.9), ("b", 0.7), ("c", 0.5))  # z: +1.2247, 0, -1.2247
    keyword = hits(K, ("c", 1.0), ("d", 0.0))  # z: +1, -1
    fused = {f.chunk_id: f for f in weighted_zscore([vector], [keyword], 0.6, 0.4)}
    z = math.sqrt(1.5)
    assert abs(fused["a"].score - 1 / (1 + math.exp(-0.6 * z))) < 1e-12
    assert abs(fused["c"].score - 1 / (1 + math.exp(-(-0.6 * z + 0.4)))) < 1e-12
    assert abs(fused["b"].score - 0.5) < 1e-12 and fused["c"].match_type == MatchType.HYBRID
    assert all(0 < f.score < 1 for f in fused.values())


def test_fuse_with_rrf_method_is_the_seeds_formula():
    both = fuse([hits(V, ("a", 0.83))], [hits(K, ("a", 1.0))], 60, 0.7, 0.3, method="rrf")
    assert both[0].score == 1.0
