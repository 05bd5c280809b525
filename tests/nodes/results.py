"""Building search results for node tests."""

from ragline.contracts.passages import ChunkType, SearchResult


def hit(id: str, content: str = "", score: float = 0.5, knowledge_id: str = "doc", chunk_index: int = 0, **extra) -> SearchResult:
    return SearchResult(
        id=id,
        content=content or f"content of {id}",
        score=score,
        knowledge_id=knowledge_id,
        knowledge_base_id=extra.pop("knowledge_base_id", "kb"),
        chunk_index=chunk_index,
        chunk_type=extra.pop("chunk_type", ChunkType.TEXT),
        **extra,
    )
