"""The vision reranker (seed: rerank.go, image hits): a multimodal rerank model gets the picture of an
image_vector hit, scores it on the text's scale and threshold, and when the picture cannot be read
or the call fails the hit is reranked as text, where the text reranker's image rule applies.

The rerank model is the scripted server behind litellm's jina_ai provider (Jina's /v1/rerank, the
API of jina-reranker-m0), so the request is the one a real multimodal reranker receives."""

from __future__ import annotations

import base64
from typing import Any

from ragline.contracts.passages import ChunkType, SearchResult
from ragline.models.rerank import Reranker
from ragline.retrieval.reranking import rerank_results
from ragline.retrieval.types import SearchParams
from ragline.retrieval.vision_rerank import VisionReranker, sees_images
from ragline.services import Services
from tests.api.live import memory_settings
from tests.image_vectors import QUESTION, ImageKb, image_kb
from tests.nodes.results import hit
from tests.scripted_model import Reply, ScriptedModel

VISION_RERANKER = "jina_ai/scripted-rerank-m0"


def vision_reranker(scripted: ScriptedModel, kb: ImageKb) -> VisionReranker:
    return VisionReranker(Reranker(VISION_RERANKER, scripted.root_url, "scripted-key"), kb.indexer.store)


def picture_scores(picture: float, text: float = 0.9) -> Reply:
    """A reranker that sees: `picture` for an image, `text` for a passage about wind."""
    def rank(query: str, document: Any) -> float:
        if isinstance(document, dict) and "image" in document:
            return picture
        passage = document["text"] if isinstance(document, dict) else document
        return text if "wind" in passage else 0.01

    return Reply(rank=rank)


async def pool(kb: ImageKb) -> list[SearchResult]:
    """The image_vector hit the question recalls, and a text passage beside it."""
    [image] = await kb.stack.searcher.search(SearchParams(query=QUESTION, knowledge_base_ids=[kb.kb_id], vector_threshold=0.5))
    assert image.chunk_type == ChunkType.IMAGE_VECTOR
    return [hit("t", "The wind vane points north.", score=0.7), image]


async def rerank(results: list[SearchResult], reranker: Reranker) -> list[SearchResult]:
    return await rerank_results(QUESTION, results, reranker, threshold=0.3, top_k=5, scoped=False, vector_threshold=0.2)


async def test_a_vision_reranker_sees_the_stored_picture_and_keeps_it_by_the_text_threshold(tmp_path, scripted_model):
    kb = await image_kb(tmp_path, scripted_model, image_similarity=0.3)
    scripted_model.on_rerank(picture_scores(picture=0.8))
    ranked = await rerank(await pool(kb), vision_reranker(scripted_model, kb))

    [request] = scripted_model.rerank_requests
    stored = base64.b64encode(kb.image.data).decode()
    assert request["documents"] == [{"text": "The wind vane points north."}, {"image": stored}]  # one call, one scale
    image = next(r for r in ranked if r.chunk_type == ChunkType.IMAGE_VECTOR)
    assert image.metadata["scored_by"] == "image" and image.metadata["model_score"] == 0.8
    assert "kept_by" not in image.metadata  # it passed the threshold on its own picture


async def test_a_picture_the_model_saw_and_turned_down_is_not_kept_by_its_vector(tmp_path, scripted_model):
    kb = await image_kb(tmp_path, scripted_model, image_similarity=0.3)  # 0.3 >= max(0.2, 0.25): a text reranker would keep it
    scripted_model.on_rerank(picture_scores(picture=0.05))
    ranked = await rerank(await pool(kb), vision_reranker(scripted_model, kb))
    assert [r.id for r in ranked] == ["t"]


async def test_a_failed_vision_call_reranks_as_text_and_the_image_rule_keeps_the_picture(tmp_path, scripted_model):
    kb = await image_kb(tmp_path, scripted_model, image_similarity=0.3)
    scripted_model.on_rerank(Reply(status=400, error="images are not accepted"), times=1)  # a 4xx is not retried
    scripted_model.on_rerank(picture_scores(picture=0.8))
    ranked = await rerank(await pool(kb), vision_reranker(scripted_model, kb))

    pictures, text = scripted_model.rerank_requests
    assert {"image": base64.b64encode(kb.image.data).decode()} in pictures["documents"]
    assert all(isinstance(d, str) for d in text["documents"])  # the retry sent passages only
    assert [r.id for r in ranked][0] == "t"
    image = ranked[-1]
    assert image.chunk_type == ChunkType.IMAGE_VECTOR and image.metadata["kept_by"] == "image_vector"
    assert "scored_by" not in image.metadata


async def test_an_image_that_cannot_be_read_goes_as_its_text(tmp_path, scripted_model):
    kb = await image_kb(tmp_path, scripted_model, image_similarity=0.3)
    results = await pool(kb)
    path = kb.indexer.store.path_of(kb.image.url)
    assert path is not None
    path.unlink()  # the stored file is gone
    scripted_model.on_rerank(picture_scores(picture=0.8))
    ranked = await rerank(results, vision_reranker(scripted_model, kb))

    [request] = scripted_model.rerank_requests
    assert all(isinstance(d, str) for d in request["documents"])
    assert ranked[-1].metadata["kept_by"] == "image_vector"


def test_a_rerank_model_sees_images_when_the_deployment_says_so_or_it_is_a_known_multimodal_one():
    assert sees_images("jina_ai/jina-reranker-m0", None)
    assert sees_images("nvidia_nim/nvidia/llama-nemotron-rerank-vl-1b-v2", None)
    assert not sees_images("cohere/rerank-v3.5", None)
    assert sees_images("openai/my-vl-reranker", True) and not sees_images("jina_ai/jina-reranker-m0", False)


def test_services_give_the_vision_reranker_only_for_a_model_that_sees(tmp_path, scripted_server):
    settings = memory_settings(data_dir=tmp_path, rerank_model="openai/my-vl-reranker", rerank_sees_images=True)
    services = Services(settings)
    reranker = services.reranker()
    assert isinstance(reranker, VisionReranker) and reranker.images is services.images.store
    assert not isinstance(services.reranker("cohere/rerank-v3.5"), VisionReranker)  # the setting speaks for the configured model
    assert isinstance(services.reranker("jina_ai/jina-reranker-m0"), VisionReranker)
    assert not isinstance(Services(memory_settings(data_dir=tmp_path, rerank_model="cohere/rerank-v3.5")).reranker(), VisionReranker)
