"""Image recall in HybridSearch (seed: knowledgebase_search_image.go): a picture with no text is
found through its own vector, at min(threshold, 0.1), in a pool 1.5x deep."""

from __future__ import annotations

import pytest

from ragline.contracts.passages import ChunkType, MatchType
from ragline.retrieval.fusion import Hit
from ragline.retrieval.image_recall import image_depth, image_space, vector_pool
from ragline.retrieval.types import SearchParams
from tests.image_vectors import QUESTION, image_kb
from tests.vector_rows import vector_row_count


def _params(kb_id: str, threshold: float = 0.5) -> SearchParams:
    return SearchParams(query=QUESTION, knowledge_base_ids=[kb_id], vector_threshold=threshold)


async def test_a_picture_without_text_is_recalled_only_through_its_image_vector(tmp_path, scripted_model):
    kb = await image_kb(tmp_path, scripted_model, image_similarity=0.3)
    results = await kb.stack.searcher.search(_params(kb.kb_id))
    assert [(r.chunk_type, r.match_type) for r in results] == [(ChunkType.IMAGE_VECTOR, MatchType.IMAGE_VECTOR)]
    hit = results[0]
    assert hit.vector_score == pytest.approx(0.3, abs=1e-4)
    assert hit.metadata["images"][0]["url"] == kb.image.url
    assert hit.metadata["text_chunk_id"]  # the text chunk the image stood in: merge chains to it
    kb.stack.searcher.image_embedder = None  # no multimodal model: nothing else finds the picture
    assert await kb.stack.searcher.search(_params(kb.kb_id)) == []


async def test_each_image_gets_one_vector_row_in_the_kbs_image_space_and_loses_it_with_its_document(tmp_path, scripted_model):
    kb = await image_kb(tmp_path, scripted_model)
    space = kb.indexer.space(kb.kb_id)
    assert space == image_space(kb.kb_id, "openai/scripted-image-embed@" + scripted_model.base_url)
    vector = kb.stack.stores["default"].vector
    assert vector_row_count(vector, space) == 1
    chunks = [c for c in kb.stack.catalog.chunks_of(kb.stack.catalog.list_knowledge(kb.kb_id)[0].id)]
    images = [c for c in chunks if c.chunk_type == ChunkType.IMAGE_VECTOR]
    assert len(images) == 1 and not images[0].indexed  # never a keyword hit
    await kb.ingestion.delete_knowledge(kb.kb_id, images[0].knowledge_id)
    assert vector_row_count(vector, space) == 0


@pytest.mark.parametrize(("similarity", "threshold", "found"), [
    (0.15, 0.5, True),  # below the text threshold, above 0.1: the modality gap is allowed for
    (0.08, 0.5, False),  # below min(0.5, 0.1)
    (0.08, 0.05, True),  # min(0.05, 0.1): a lower text threshold lowers the image bar too
])
async def test_image_hits_pass_at_min_of_threshold_and_0_1(tmp_path, scripted_model, similarity, threshold, found):
    kb = await image_kb(tmp_path, scripted_model, image_similarity=similarity)
    results = await kb.stack.searcher.search(_params(kb.kb_id, threshold))
    assert any(r.chunk_type == ChunkType.IMAGE_VECTOR for r in results) is found


def _hits(scores: list[float], kb_id: str = "kb") -> list[Hit]:
    return [Hit(f"c{i}", kb_id, s, MatchType.VECTOR) for i, s in enumerate(scores)]


def test_a_group_with_image_vectors_keeps_a_pool_one_and_a_half_times_deeper():
    text = _hits([0.9 - i * 0.005 for i in range(60)])
    image = [Hit("img", "kb", 0.2, MatchType.VECTOR)]
    pool = vector_pool(text, image, {"kb"}, 0.5, depth=50)
    assert len(pool) == 61 and pool[-1].chunk_id == "img"  # 75 places: all 60 texts and the picture
    assert len(vector_pool(text, [], {"kb"}, 0.5, depth=50)) == 50  # no image rows: nothing changes
    assert image_depth(50) == 75 and image_depth(400) == 500  # still capped at the pool size


def test_image_rows_of_bases_not_searched_for_images_are_dropped():
    pool = vector_pool([], [Hit("img", "other", 0.9, MatchType.VECTOR)], {"kb"}, 0.5, depth=50)
    assert pool == []
