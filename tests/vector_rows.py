"""Counting a knowledge base's stored vector rows on either backend (tests run on both, see --retrieval-backend)."""

from __future__ import annotations

from typing import Any

from ragline.retrieval.redis_vectors import RedisVectorStore, key_prefix


def vector_row_count(vector: Any, kb_id: str) -> int:
    """Rows in the KB's Chroma collection or under its Redis key prefix (0 when it has none)."""
    if isinstance(vector, RedisVectorStore):
        return sum(1 for _ in vector.client.scan_iter(match=key_prefix(kb_id) + "*"))
    col = vector._collection(kb_id, create=False)
    return col.count() if col is not None else 0


def vectors_dropped(vector: Any, kb_id: str) -> bool:
    """The KB's collection (Chroma) or index (Redis) is gone, not merely empty."""
    if isinstance(vector, RedisVectorStore):
        return not vector._index(kb_id).exists() and vector_row_count(vector, kb_id) == 0
    return vector._collection(kb_id, create=False) is None
