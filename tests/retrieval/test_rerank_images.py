"""The rerank rules for image hits (seed: internal/reranking/image.go), with a text reranker."""

from __future__ import annotations

from ragline.contracts.passages import ChunkType
from ragline.models.rerank import RerankScore
from ragline.retrieval.reranking import Scored, keep_image_hits, rerank_results
from tests.nodes.results import hit


def picture(id: str, vector: float, ocr: str = "Monthly rainfall", kind: ChunkType = ChunkType.IMAGE_OCR):
    return hit(id, ocr, score=0.5, chunk_type=kind, vector_score=vector,
               metadata={"images": [{"url": f"local://images/{id}.png", "ocr_text": ocr if kind == ChunkType.IMAGE_OCR else ""}]})


def test_a_rejected_picture_with_a_strong_vector_is_kept_by_image_vector():
    [kept] = keep_image_hits([Scored(picture("p", 0.6), 0.01)], [], vector_threshold=0.5)
    assert kept.result.metadata["kept_by"] == "image_vector"


def test_an_image_with_200_ocr_characters_is_text_and_falls_with_the_threshold():
    assert keep_image_hits([Scored(picture("p", 0.9, "x" * 200), 0.01)], [], vector_threshold=0.5) == []
    assert keep_image_hits([Scored(picture("p", 0.9, "x" * 199), 0.01)], [], vector_threshold=0.5) != []


def test_the_vector_floor_is_the_threshold_but_never_below_025():
    assert keep_image_hits([Scored(picture("p", 0.24), 0.01)], [], vector_threshold=0.1) == []
    assert keep_image_hits([Scored(picture("p", 0.25), 0.01)], [], vector_threshold=0.1) != []
    assert keep_image_hits([Scored(picture("p", 0.45), 0.01)], [], vector_threshold=0.5) == []


def test_at_most_two_pictures_are_kept_best_vector_first_and_text_hits_never():
    scored = [Scored(picture(f"p{i}", v), 0.01) for i, v in enumerate((0.3, 0.7, 0.5))]
    scored.append(Scored(hit("t", "text", vector_score=0.9), 0.01))
    assert [s.result.id for s in keep_image_hits(scored, [], vector_threshold=0.2)] == ["p1", "p2"]


def test_a_caption_hit_carries_no_ocr_and_is_a_picture():
    assert keep_image_hits([Scored(picture("c", 0.6, "A bar chart", ChunkType.IMAGE_CAPTION), 0.01)], [], vector_threshold=0.5)


class TextReranker:
    """Scores text passages high and the picture's passage low, as a text-only model does."""

    model = "scripted/text-reranker"

    async def rerank(self, query: str, documents: list[str]) -> list[RerankScore]:
        return [RerankScore(i, 0.9 if "warranty" in d else 0.01) for i, d in enumerate(documents)]


async def test_rerank_appends_kept_pictures_after_the_ranked_hits_even_when_no_text_passes():
    results = [hit("t", "The warranty lasts two years.", score=0.6), picture("p", 0.6)]
    ranked = await rerank_results("warranty chart", results, TextReranker(), threshold=0.5, top_k=5, scoped=False)  # type: ignore[arg-type]
    assert [r.id for r in ranked] == ["t", "p"] and ranked[-1].metadata["kept_by"] == "image_vector"
    only = await rerank_results("chart", [picture("p", 0.6)], TextReranker(), threshold=0.5, top_k=5, scoped=False)  # type: ignore[arg-type]
    assert [r.id for r in only] == ["p"] and only[0].metadata["kept_by"] == "image_vector"
