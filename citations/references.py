"""The payload of the references event: every merged result, cited or not.

Replaces the seed's references SSE event, which always carries the whole MergeResult (feeding the
"retrieved results" panel) before the answer streams, whether inline citations are on or off.
This is data shaping only; `events.references(...)` wraps it into an event.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ragline.citations.sources import SourceChunk
from ragline.retrieval.locations import ChunkLocation, location_of


class Reference(BaseModel):
    """One entry of the references event; `chunk_id` is what a `<kb chunk_id=.../>` points at."""

    model_config = ConfigDict(frozen=True)

    chunk_id: str
    knowledge_id: str = ""
    knowledge_base_id: str = ""
    title: str = ""
    content: str = ""
    score: float = 0.0
    chunk_index: int = 0
    chunk_type: str = "text"
    match_type: str = ""
    source: Literal["knowledge_base", "web_search"] = "knowledge_base"
    url: str = ""
    location: ChunkLocation | None = Field(None, description="Where the passage stands in its document: PDF pages, heading path, "
                                           "character offsets in the document's text; null for a web page or an older chunk.")
    metadata: dict[str, Any] = Field(default_factory=dict)


def build_references(results: Iterable[SourceChunk]) -> list[Reference]:
    """Every result in merged order: not filtered by citations, not de-duplicated, not re-ranked.

    A web page's `url` is always set (falling back to its id), so the panel can link it; a
    passage of a knowledge base carries its `location` in its document.
    """
    return [
        Reference(
            chunk_id=r.chunk_id,
            knowledge_id=r.knowledge_id,
            knowledge_base_id=r.knowledge_base_id,
            title=r.title,
            content=r.content,
            score=r.score,
            chunk_index=r.chunk_index,
            chunk_type=r.chunk_type,
            match_type=r.match_type,
            source="web_search" if r.is_web else "knowledge_base",
            url=r.page_url if r.is_web else r.url,
            location=None if r.is_web else location_of(r.metadata),
            metadata=dict(r.metadata),
        )
        for r in results
    ]


def references_payload(results: Iterable[SourceChunk]) -> list[dict[str, Any]]:
    """`build_references` as JSON-ready dicts, for the event constructor."""
    return [reference.model_dump(mode="json") for reference in build_references(results)]
