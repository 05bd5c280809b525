"""The passage: one piece of a document found for a question, from search to reference.

The retrievers make them, the state carries them through fusion, reranking and merging, and the
citations project them into references; the parallel search branches meet in
`merge_search_results`, the state's reducer.
"""

from __future__ import annotations

import hashlib
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ChunkType(StrEnum):
    TEXT = "text"
    PARENT = "parent_text"  # context holder of parent/child chunking; never indexed itself
    FAQ = "faq"
    IMAGE_OCR = "image_ocr"  # text read from an image of a document (or an uploaded image) by offline OCR
    IMAGE_CAPTION = "image_caption"  # an image's description by the configured vision model
    WIKI_PAGE = "wiki_page"  # a summary page the chat model wrote from one or a few documents (ingestion/wiki.py)
    IMAGE_VECTOR = "image_vector"  # an image's own vector by the multimodal embedding model; never keyword-indexed


class MatchType(StrEnum):
    VECTOR = "vector"
    KEYWORD = "keyword"
    HYBRID = "hybrid"  # found by both retrievers and fused
    IMAGE_VECTOR = "image_vector"  # recalled through the image's own vector (retrieval/image_recall.py)


class SearchResult(BaseModel):
    id: str
    content: str
    score: float
    knowledge_id: str
    knowledge_base_id: str
    knowledge_title: str = ""
    chunk_index: int = 0
    chunk_type: ChunkType = ChunkType.TEXT
    match_type: MatchType = MatchType.VECTOR
    pre_chunk_id: str | None = None
    next_chunk_id: str | None = None
    parent_chunk_id: str | None = None
    vector_score: float | None = None  # similarity before fusion (rerank's image rule reads it)
    keyword_score: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class SearchTarget(BaseModel):
    """One knowledge base to search, optionally narrowed to documents or tags."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    knowledge_base_id: str = Field(description="The knowledge base to search.")
    knowledge_ids: tuple[str, ...] = Field((), description="Only these documents of the knowledge base.")
    tag_ids: tuple[str, ...] = Field((), description="Only documents with these tags.")

    @property
    def is_scoped(self) -> bool:
        return bool(self.knowledge_ids or self.tag_ids)


def content_signature(content: str) -> str:
    """searchutil.BuildContentSignature: whitespace- and case-insensitive hash of a passage."""
    normalized = " ".join(content.lower().split())
    return hashlib.sha1(normalized.encode("utf-8")).hexdigest()


def merge_search_results(existing: list[SearchResult] | None, new: list[SearchResult] | None) -> list[SearchResult]:
    """Reducer of parallel search branches (replaces Clone + RunParallel + removeDuplicateResults).

    A result is dropped when its chunk id or its content signature was already seen; the first
    occurrence wins, so the order is stable.
    """
    merged: list[SearchResult] = []
    seen_ids: set[str] = set()
    seen_signatures: set[str] = set()
    for result in [*(existing or []), *(new or [])]:
        chunk_id, signature = result.id, content_signature(result.content)
        if (chunk_id and chunk_id in seen_ids) or signature in seen_signatures:
            continue
        if chunk_id:
            seen_ids.add(chunk_id)
        seen_signatures.add(signature)
        merged.append(result)
    return merged


def knowledge_ids(passages: list[Any]) -> set[str]:
    """The documents of passages as a stage writes them: search results, or (agent sources, a
    checkpoint) their dicts."""
    ids = {p.get("knowledge_id") if isinstance(p, dict) else getattr(p, "knowledge_id", "") for p in passages}
    return {i for i in ids if isinstance(i, str) and i}
