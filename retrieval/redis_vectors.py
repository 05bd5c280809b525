"""Vector store on the Redis Query Engine (HNSW, cosine), shared by every replica of a deployment.

Replaces, in shared mode (RAGLINE_REDIS_URL), the embedded Chroma folder of vector_store.py; the
VectorStore protocol is the same. One search index per knowledge base (`ragline_vec_<kb id>`),
not one shared index with a KB tag filter, because:
- a KB's search stays a plain KNN on its own HNSW graph: a tag-filtered KNN on a shared graph makes
  the engine pick between batched KNN and brute force, and a small KB in a large index pays for
  everybody's rows (recall and latency would depend on other tenants' data);
- deleting a KB is one FT.DROPINDEX DD, as with Chroma's one collection per KB and the keyword
  index's one index per KB (redis_keyword.py);
- each KB may use another embedding model, hence another dimension: an index has one.
A query that names documents filters by the `knowledge_id` tag (the engine's hybrid KNN).

Rows are hashes `ragline:vec:<kb id>:<row id>` with the embedding as float32 bytes, the same
precision Chroma keeps. The index is made on the first write, with that write's dimension, which
is also kept in `ragline:vecdim:<kb id>` so a write of another dimension fails loudly instead of
being silently left out of the index.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from typing import Any

import numpy as np
import redis
from redisvl.exceptions import RedisSearchError
from redisvl.index import SearchIndex
from redisvl.query import FilterQuery, VectorQuery
from redisvl.query.filter import FilterExpression, Tag

from ragline import defaults
from ragline.retrieval.errors import RetrievalError
from ragline.retrieval.redis_connect import connect_search
from ragline.retrieval.types import NOTHING_HIDDEN, Hidden
from ragline.retrieval.vector_store import ThreadedVectorStore, VectorHit, VectorQueryResult, VectorRow, image_spaces_prefix

_WRITE_BATCH = 500  # rows per pipeline round trip
_FAQ_ROWS_MAX = 10_000  # rows one delete may find for 500 chunks (FAQ entries hold a few questions each)


def index_name(kb_id: str) -> str:
    return f"ragline_vec_{kb_id}"


def key_prefix(kb_id: str) -> str:
    # the trailing colon matters: KB "ab" must not index the rows of KB "abc"
    return f"ragline:vec:{kb_id}:"


def dimension_key(kb_id: str) -> str:
    return f"ragline:vecdim:{kb_id}"


def schema(kb_id: str, dims: int, ef_search: int, max_neighbors: int) -> dict[str, Any]:
    """Hash rows: the chunk and document ids as tags, the embedding as an HNSW cosine field."""
    return {
        "index": {"name": index_name(kb_id), "prefix": key_prefix(kb_id), "storage_type": "hash"},
        "fields": [
            {"name": "chunk_id", "type": "tag"},
            {"name": "knowledge_id", "type": "tag"},
            {"name": "embedding", "type": "vector", "attrs": {
                "algorithm": "hnsw", "distance_metric": "cosine", "datatype": "float32", "dims": dims,
                # the same graph breadth as the Chroma collections (vector_store.py explains M = 32)
                "m": max_neighbors, "ef_construction": defaults.HNSW_EF_CONSTRUCTION, "ef_runtime": ef_search,
            }},
        ],
    }


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _blob(vector: list[float]) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


def _documents_filter(knowledge_ids: list[str] | None, hidden: Collection[str]) -> FilterExpression | None:
    """The documents searched, without the hidden ones (a reader's unreadable documents)."""
    only = Tag("knowledge_id") == list(knowledge_ids) if knowledge_ids else None
    never = Tag("knowledge_id") != sorted(hidden) if hidden else None
    if only is not None and never is not None:
        return only & never
    return only if only is not None else never


class RedisVectorStore(ThreadedVectorStore):
    """HNSW indexes in Redis 8, one per KB; the sync client runs in worker threads (one pool for every loop)."""

    def __init__(self, client: redis.Redis, ef_search: int = defaults.HNSW_EF_SEARCH,
                 max_neighbors: int = defaults.HNSW_MAX_NEIGHBORS) -> None:
        self.client = client
        self.ef_search = ef_search
        self.max_neighbors = max_neighbors
        self._lock = threading.Lock()

    @classmethod
    def from_url(cls, url: str, ef_search: int = defaults.HNSW_EF_SEARCH,
                 max_neighbors: int = defaults.HNSW_MAX_NEIGHBORS) -> RedisVectorStore:
        return cls(connect_search(url), ef_search, max_neighbors)

    def _index(self, kb_id: str, dims: int = 1) -> SearchIndex:
        # dims only matters when the index is created; reads and deletes name the index alone
        return SearchIndex.from_dict(schema(kb_id, dims, self.ef_search, self.max_neighbors), redis_client=self.client)

    def _ensure(self, kb_id: str, dims: int) -> SearchIndex:
        """The KB's index, made with `dims` on first write; a write of another dimension is refused."""
        with self._lock:
            stored = self.client.get(dimension_key(kb_id))
            index = self._index(kb_id, dims)
            if stored is not None and int(stored) != dims:
                raise RetrievalError(f"knowledge base {kb_id} holds {int(stored)}-dimensional vectors, not {dims}")
            if stored is None or not index.exists():
                index.create(overwrite=False)
                self.client.set(dimension_key(kb_id), dims)
            return index

    def upsert_sync(self, kb_id: str, rows: list[VectorRow]) -> None:
        if not rows:
            return
        self._ensure(kb_id, len(rows[0].embedding))
        prefix = key_prefix(kb_id)
        for start in range(0, len(rows), _WRITE_BATCH):
            with self.client.pipeline(transaction=False) as pipe:
                for row in rows[start : start + _WRITE_BATCH]:
                    pipe.hset(prefix + row.id, mapping={"chunk_id": row.chunk_id, "knowledge_id": row.knowledge_id,
                                                       "embedding": _blob(row.embedding)})
                pipe.execute()

    def delete_chunks_sync(self, kb_id: str, chunk_ids: list[str]) -> None:
        """Every row of the chunks: a text chunk's own row and an FAQ entry's question rows ("<id>:<n>"),
        found through the index's chunk_id tag rather than a SCAN of the whole keyspace."""
        prefix = key_prefix(kb_id)
        for start in range(0, len(chunk_ids), _WRITE_BATCH):
            batch = chunk_ids[start : start + _WRITE_BATCH]
            keys = {(prefix + c).encode() for c in batch} | set(self._keys_of(kb_id, batch))
            self.client.unlink(*keys)

    def _keys_of(self, kb_id: str, chunk_ids: list[str]) -> list[bytes]:
        query = FilterQuery(Tag("chunk_id") == chunk_ids, return_fields=["chunk_id"], num_results=_FAQ_ROWS_MAX)
        try:
            return [doc["id"].encode() for doc in self._index(kb_id).query(query)]
        except RedisSearchError as exc:
            if "no such index" in str(exc).lower():  # nothing was ever written to this KB
                return []
            raise

    def delete_kb_sync(self, kb_id: str) -> None:
        index = self._index(kb_id)
        try:
            index.delete(drop=True)  # the index and every row under it
        except RedisSearchError:
            if index.exists():  # already gone (deleted twice, or by another replica) is not an error
                raise
        self.client.delete(dimension_key(kb_id))

    def delete_image_spaces_sync(self, kb_id: str) -> None:
        """Every image space of the KB: those with an index, and those whose dimension key outlived it."""
        prefix = image_spaces_prefix(kb_id)
        spaces = {_text(name)[len(index_name("")):] for name in self.client.execute_command("FT._LIST")
                  if _text(name).startswith(index_name(prefix))}
        spaces |= {_text(key)[len(dimension_key("")):] for key in self.client.scan_iter(match=dimension_key(prefix) + "*")}
        for space in spaces:
            self.delete_kb_sync(space)

    def query_sync(self, kb_id: str, embedding: list[float], top_k: int,
                   knowledge_ids: list[str] | None = None, hidden: Hidden = NOTHING_HIDDEN) -> VectorQueryResult:
        if top_k <= 0:
            return VectorQueryResult([], False)
        query = VectorQuery(_blob(embedding), "embedding", return_fields=["chunk_id"], num_results=top_k,
                            filter_expression=_documents_filter(knowledge_ids, hidden.documents),
                            ef_runtime=self.ef_search)
        try:
            docs = self._index(kb_id).query(query)
        except RedisSearchError as exc:
            if "no such index" in str(exc).lower():  # nothing was ever written to this KB
                return VectorQueryResult([], False)
            raise
        hits: dict[str, VectorHit] = {}
        for doc in docs:
            chunk_id = doc["chunk_id"]
            if chunk_id not in hits:  # FAQ: several questions of one entry; the closest counts
                hits[chunk_id] = VectorHit(chunk_id, min(1.0, max(0.0, 1.0 - float(doc["vector_distance"]))))
        return VectorQueryResult(list(hits.values()), filled=len(docs) >= top_k)

    def embeddings_sync(self, kb_id: str, row_ids: list[str]) -> dict[str, list[float]]:
        if not row_ids:
            return {}
        prefix = key_prefix(kb_id)
        with self.client.pipeline(transaction=False) as pipe:
            for row_id in row_ids:
                pipe.hget(prefix + row_id, "embedding")
            blobs = pipe.execute()
        return {rid: np.frombuffer(blob, dtype=np.float32).tolist() for rid, blob in zip(row_ids, blobs) if blob}

