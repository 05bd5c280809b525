from ragline.contracts.passages import MatchType
from ragline.retrieval.fusion import (
    Hit,
    deduplicate_by_score,
    fuse,
    normalize_keyword_scores,
    weighted_rrf,
)

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


# The two pools of "What is the default compression preset of xz?" over the real-documents set (benchmarks/
# real_documents.py, xz's man page embedded under its title): every chunk is 0.85-0.89 similar to the question;
# the answering one ("The default is -6") is missing from the vector pool and third on the keyword side.
XZ_VECTOR = [
    ("c0", 0.8922), ("c1", 0.8914), ("c2", 0.8886), ("c3", 0.8871), ("c4", 0.8868), ("c5", 0.8814), ("c6", 0.879),
    ("c7", 0.8771), ("c8", 0.8738), ("c9", 0.8735), ("c10", 0.8729), ("c11", 0.8723), ("c12", 0.872), ("c13", 0.8719),
    ("c14", 0.8717), ("c15", 0.8707), ("c16", 0.8707), ("c17", 0.87), ("c18", 0.8699), ("c19", 0.8696), ("c20", 0.8695),
    ("c21", 0.8691), ("c22", 0.869), ("c23", 0.869), ("c24", 0.869), ("c25", 0.8688), ("c26", 0.8684), ("answer",
    0.8682), ("c27", 0.868), ("c28", 0.8679), ("c29", 0.8672), ("c30", 0.8666), ("c31", 0.8659), ("c32", 0.8655),
    ("c33", 0.8655), ("c34", 0.865), ("c35", 0.8647), ("c36", 0.8643), ("c37", 0.8636), ("c38", 0.863), ("c39", 0.8621),
    ("c40", 0.8617), ("c41", 0.8614), ("c42", 0.8613), ("c43", 0.8612), ("c44", 0.8609), ("c45", 0.86), ("c46", 0.8599),
    ("c47", 0.8597), ("c48", 0.8595),
]
XZ_KEYWORD = [
    ("c3", 1.0), ("c6", 0.876), ("answer", 0.862), ("c27", 0.76), ("c8", 0.756), ("c49", 0.744), ("c7", 0.733), ("c42",
    0.72), ("c14", 0.694), ("c50", 0.686), ("c51", 0.683), ("c24", 0.677), ("c22", 0.667), ("c52", 0.636), ("c33",
    0.632), ("c53", 0.619), ("c2", 0.615), ("c54", 0.601), ("c10", 0.593), ("c25", 0.588), ("c31", 0.571), ("c55",
    0.558), ("c56", 0.544), ("c23", 0.536), ("c57", 0.533), ("c46", 0.526), ("c20", 0.522), ("c58", 0.508), ("c38",
    0.501), ("c1", 0.491), ("c28", 0.477), ("c4", 0.47), ("c59", 0.465), ("c13", 0.462), ("c11", 0.459), ("c60", 0.452),
    ("c0", 0.447), ("c61", 0.442), ("c62", 0.439), ("c63", 0.435), ("c64", 0.428), ("c65", 0.426), ("c66", 0.424),
    ("c32", 0.422), ("c36", 0.421), ("c67", 0.42), ("c68", 0.418), ("c69", 0.414), ("c70", 0.408), ("c34", 0.405),
]


def test_a_vector_pool_whose_similarities_barely_differ_does_not_outvote_the_keyword_side():
    from ragline import defaults
    from ragline.retrieval.fusion import weighted_zscore

    def top3(floor: float) -> list[str]:
        fused = weighted_zscore([hits(V, *XZ_VECTOR)], [hits(K, *XZ_KEYWORD)], 0.6, 0.4, vector_std_floor=floor)
        return [f.chunk_id for f in fused[:3]]

    assert "answer" in top3(defaults.ZSCORE_VECTOR_STD_FLOOR)
    assert "answer" not in top3(0.0)  # hundredths of cosine stretched into z-scores of 2-3 put it 6th or lower


def test_the_configured_fusion_carries_the_vector_floor_and_rrf_none():
    from ragline import defaults
    from ragline.retrieval.config import RetrievalConfig
    from ragline.retrieval.hybrid import fusion_args

    assert fusion_args(RetrievalConfig())["vector_std_floor"] == defaults.ZSCORE_VECTOR_STD_FLOOR > 0
    assert fusion_args(RetrievalConfig(fusion="rrf"))["vector_std_floor"] == 0.0
