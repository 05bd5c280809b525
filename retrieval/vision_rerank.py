"""The vision reranker: a multimodal rerank model scores an image hit by its picture (seed: rerank.go,
image hits; internal/reranking/image.go).

A text reranker sees only an image's caption and OCR, so it may turn down a picture whose subject
is not in its words. A rerank model that takes images (jina-reranker-m0, llama-nemotron-rerank-vl)
gets the stored image of each image_vector hit instead, in the same call as the text passages, so
the picture's score is on the text's scale and meets the same threshold. An image that cannot be
read (gone, too large, not a PNG/JPEG/WebP/GIF) is sent as its text; when the call fails the whole
pool is scored again as text (reranking.py), and the text reranker's image rule applies.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Protocol, cast

from ragline.contracts.passages import ChunkType, SearchResult
from ragline.models.rerank import Reranker, RerankError, RerankScore
from ragline.models.vision import vision_data_url

log = logging.getLogger(__name__)

# Rerank models whose input takes images (the seed's catalog), by the name after the provider prefix.
KNOWN_MULTIMODAL_RERANKERS = frozenset({"jina-reranker-m0", "llama-nemotron-rerank-vl-1b-v2"})
SCORED_BY = "scored_by"  # metadata key: "image" on a hit the model judged by its picture

Document = str | dict[str, str]


def sees_images(model: str, declared: bool | None) -> bool:
    """The deployment says so (rerank_sees_images), else the model is one known to take images."""
    if declared is not None:
        return declared
    return model.rsplit("/", 1)[-1].lower() in KNOWN_MULTIMODAL_RERANKERS


class ImageBytes(Protocol):
    """Where a picture's bytes are read (the image store of ingestion/image_store.py); blocks: call it in a worker thread."""

    def read(self, url: str) -> bytes | None: ...


class VisionReranker(Reranker):
    """A rerank model that scores text passages and pictures in one call."""

    def __init__(self, reranker: Reranker, images: ImageBytes) -> None:
        super().__init__(reranker.model, reranker.api_base, reranker.api_key, reranker.timeout, reranker.retry)
        self.images = images

    async def rerank_documents(self, query: str, documents: Sequence[Document]) -> list[RerankScore]:
        # The base client hands its documents to litellm untouched, and litellm's rerank takes text
        # and {"image": ...} objects in one list: only the base's annotation says text.
        return await self.rerank(query, cast(list[str], list(documents)))


def picture_of(result: SearchResult, images: ImageBytes) -> dict[str, str] | None:
    """The image document of an image_vector hit: its stored image (files or the shared Redis), in a
    format and size providers take, as base64 (Jina's form); None when it cannot be read. Blocking:
    run it in a thread."""
    if result.chunk_type != ChunkType.IMAGE_VECTOR:
        return None
    infos = [i for i in result.metadata.get("images", []) or [] if isinstance(i, dict) and i.get("url")]
    data = images.read(str(infos[0]["url"])) if infos else None  # bounded by the ingestion limit
    data_url = vision_data_url(data) if data is not None else None
    return {"image": data_url.partition(",")[2]} if data_url else None


def documents_with_pictures(results: Sequence[SearchResult], passages: Sequence[str],
                            images: ImageBytes) -> tuple[list[Document], set[str]]:
    """One document per result: its picture when it is a readable image hit, else its passage as a
    text object (a mixed list is all objects); and the ids that went as pictures."""
    documents: list[Document] = []
    pictured: set[str] = set()
    for result, passage in zip(results, passages):
        picture = picture_of(result, images)
        if picture is not None:
            pictured.add(result.id)
        documents.append(picture or {"text": passage})
    return documents, pictured


async def picture_scores(reranker: VisionReranker, query: str, results: Sequence[SearchResult],
                         passages: Sequence[str]) -> tuple[list[RerankScore], set[str]] | None:
    """Scores with the image hits judged by their pictures, and which those were; None when no
    picture could be read or the call failed: the caller scores the pool as text instead."""
    documents, pictured = await asyncio.to_thread(documents_with_pictures, results, passages, reranker.images)
    if not pictured:
        return None
    try:
        return await reranker.rerank_documents(query, documents), pictured
    except RerankError as exc:
        log.warning("scoring %d pictures failed, reranking them as text: %s", len(pictured), exc)
        return None
