"""Vector store behind a small interface; Chroma (a folder, or a server over HTTP) by default.

Replaces the vector side of the seed's retrieve engines. Chroma always receives our own
embeddings: its default embedding function downloads a model at first use and fails offline,
so collections are opened with `embedding_function=None` and never embed anything themselves.
One collection per knowledge base, and one per image model for its image vectors
(image_recall.py): deleting a KB drops them in a call each.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import chromadb
from chromadb.config import Settings as ChromaSettings

from ragline.retrieval.types import NOTHING_HIDDEN, Hidden

# Chroma's Rust bindings hold the GIL for a whole call, and the event loop of this process waits for
# it: 4,579 rows upserted 1,000 at a time stalled a loop up to ~250 ms, 250 at a time ~130 ms
# (upsert 1.0 s -> 1.2 s); a delete by metadata filter stalled it ~500 ms, by id ~50 ms.
CHROMA_WRITE_BATCH = 100
# Between two writes the writing thread sleeps (GIL released) this long. Without it the thread takes
# the GIL back at once, and a request, which needs the GIL several times, waited one whole Rust call
# for each (a convoy: /health gaps p99 ~580 ms at 4,579 rows, ~100 ms with the pause).
CHROMA_YIELD_S = 0.01


@dataclass(frozen=True)
class VectorRow:
    id: str  # equals chunk_id for text chunks; FAQ questions get one row each
    chunk_id: str
    knowledge_id: str
    embedding: list[float]


@dataclass(frozen=True)
class VectorHit:
    chunk_id: str
    similarity: float  # cosine similarity clamped to [0,1]


@dataclass(frozen=True)
class VectorQueryResult:
    hits: list[VectorHit]
    filled: bool  # the store returned as many rows as asked: a deeper search may find more

class VectorStore(Protocol):
    async def upsert(self, kb_id: str, rows: list[VectorRow]) -> None: ...

    async def delete_chunks(self, kb_id: str, chunk_ids: list[str]) -> None: ...

    async def delete_kb(self, kb_id: str) -> None: ...

    async def delete_image_spaces(self, kb_id: str) -> None: ...

    async def query(
        self, kb_id: str, embedding: list[float], top_k: int, knowledge_ids: list[str] | None = None,
        hidden: Hidden = NOTHING_HIDDEN,
    ) -> VectorQueryResult:
        """The nearest rows, of `knowledge_ids` only when given, never of a `hidden` document (one the reader may not read)."""
        ...

    async def embeddings(self, kb_id: str, row_ids: list[str]) -> dict[str, list[float]]: ...


def _hits(row_ids: list[str], distances: list[float], top_k: int) -> VectorQueryResult:
    hits: dict[str, VectorHit] = {}
    for row_id, dist in zip(row_ids, distances):
        chunk_id = chunk_id_of(row_id)
        if chunk_id not in hits:  # FAQ: several questions of one entry; the closest counts
            hits[chunk_id] = VectorHit(chunk_id, min(1.0, max(0.0, 1.0 - float(dist))))
    return VectorQueryResult(list(hits.values()), filled=len(row_ids) >= top_k)


def _where(knowledge_ids: list[str] | None, hidden: Collection[str]) -> dict[str, Any] | None:
    """Chroma's metadata filter: the documents searched, without the hidden ones."""
    clauses: list[dict[str, Any]] = []
    if knowledge_ids:
        clauses.append({"knowledge_id": {"$in": list(knowledge_ids)}})
    if hidden:
        clauses.append({"knowledge_id": {"$nin": sorted(hidden)}})
    return clauses[0] if len(clauses) == 1 else ({"$and": clauses} if clauses else None)


# A reader's filtered query first asks deeper without a filter: deep enough that the readable rows
# expected among them are this many times the depth (a reader who may read a fifth asks ~8x), so the
# `$nin` query after it is rare; never deeper than the cap.
CHROMA_OVERFETCH_MARGIN = 1.4
CHROMA_OVERFETCH_RETRY = 3  # short of readable rows: once more, this many times deeper, before the `$nin` query
CHROMA_OVERFETCH_MAX = 1000
ROW_COUNT_TTL_S = 10.0  # a collection's row count, for the over-fetch depth only (a stale one costs time, never a row)


def chunk_id_of(row_id: str) -> str:
    """A text chunk's row id is its chunk id; an FAQ question's is "<chunk id>:<n>" (ids are hex)."""
    return row_id.partition(":")[0]


def collection_name(kb_id: str) -> str:
    return f"ragline_kb_{kb_id}"


def image_spaces_prefix(kb_id: str) -> str:
    """How every image space of a KB begins, whichever image model filled it (image_recall.image_space
    names them "<kb id>-img-<model hash>"; KB ids are hex, so no other KB's space shares the prefix)."""
    return f"{kb_id}-img-"


class ThreadedVectorStore:
    """The async VectorStore methods over a store's blocking `*_sync` ones, each run in a thread
    (both client libraries block: the event loop must not wait on them)."""

    def upsert_sync(self, kb_id: str, rows: list[VectorRow]) -> None:
        raise NotImplementedError

    def delete_chunks_sync(self, kb_id: str, chunk_ids: list[str]) -> None:
        raise NotImplementedError

    def delete_kb_sync(self, kb_id: str) -> None:
        raise NotImplementedError

    def delete_image_spaces_sync(self, kb_id: str) -> None:
        raise NotImplementedError

    def query_sync(self, kb_id: str, embedding: list[float], top_k: int, knowledge_ids: list[str] | None = None,
                   hidden: Hidden = NOTHING_HIDDEN) -> VectorQueryResult:
        raise NotImplementedError

    def embeddings_sync(self, kb_id: str, row_ids: list[str]) -> dict[str, list[float]]:
        raise NotImplementedError

    async def upsert(self, kb_id: str, rows: list[VectorRow]) -> None:
        await asyncio.to_thread(self.upsert_sync, kb_id, rows)

    async def delete_chunks(self, kb_id: str, chunk_ids: list[str]) -> None:
        await asyncio.to_thread(self.delete_chunks_sync, kb_id, chunk_ids)

    async def delete_kb(self, kb_id: str) -> None:
        await asyncio.to_thread(self.delete_kb_sync, kb_id)

    async def delete_image_spaces(self, kb_id: str) -> None:
        """Drop the KB's image-vector spaces, of the current image model and of any earlier one."""
        await asyncio.to_thread(self.delete_image_spaces_sync, kb_id)

    async def query(self, kb_id: str, embedding: list[float], top_k: int, knowledge_ids: list[str] | None = None,
                    hidden: Hidden = NOTHING_HIDDEN) -> VectorQueryResult:
        return await asyncio.to_thread(self.query_sync, kb_id, embedding, top_k, knowledge_ids, hidden)

    async def embeddings(self, kb_id: str, row_ids: list[str]) -> dict[str, list[float]]:
        """Stored vectors by row id (pseudo-relevance feedback reads its hits' vectors); unknown ids are left out."""
        return await asyncio.to_thread(self.embeddings_sync, kb_id, row_ids)


class ChromaVectorStore(ThreadedVectorStore):
    """Chroma collections of cosine space with a near-exact HNSW search breadth."""

    def __init__(self, client: Any, ef_search: int = 200, max_neighbors: int = 32) -> None:
        self.client = client
        self.ef_search = ef_search
        self.max_neighbors = max_neighbors
        self._collections: dict[str, Any] = {}
        self._row_counts: dict[str, tuple[float, int]] = {}  # collection -> (until, rows): sizes the over-fetch

    @classmethod
    def persistent(cls, path: Path, ef_search: int = 200, max_neighbors: int = 32) -> ChromaVectorStore:
        path.mkdir(parents=True, exist_ok=True)
        settings = ChromaSettings(anonymized_telemetry=False)
        return cls(chromadb.PersistentClient(path=str(path), settings=settings), ef_search, max_neighbors)

    @classmethod
    def http(cls, url: str, ef_search: int = 200, max_neighbors: int = 32) -> ChromaVectorStore:
        from urllib.parse import urlparse

        parts = urlparse(url)
        client = chromadb.HttpClient(
            host=parts.hostname or "localhost", port=parts.port or 8000, ssl=parts.scheme == "https",
            settings=ChromaSettings(anonymized_telemetry=False),
        )
        return cls(client, ef_search, max_neighbors)

    def _collection(self, kb_id: str, create: bool) -> Any | None:
        if kb_id in self._collections:
            return self._collections[kb_id]
        name = collection_name(kb_id)
        if create:
            col = self.client.get_or_create_collection(
                name, embedding_function=None,
                # max_neighbors (HNSW M) 32, not Chroma's 16: with 16, its multi-threaded build left
                # some rows unreachable in 2 of 4 builds of CMRC (848 rows): up to 28 exact top-10 hits
                # missing even at n_results=500 (vector nDCG@10 0.963-0.967 against 0.973 exact);
                # with 32, none missing in every build.
                configuration={"hnsw": {"space": "cosine", "ef_search": self.ef_search, "ef_construction": 200,
                                        "max_neighbors": self.max_neighbors}},
            )
        else:
            try:
                col = self.client.get_collection(name, embedding_function=None)
            except Exception:  # chroma raises NotFoundError / ValueError depending on the client
                return None
        self._collections[kb_id] = col
        return col

    def upsert_sync(self, kb_id: str, rows: list[VectorRow]) -> None:
        col = self._collection(kb_id, create=True)
        assert col is not None  # create=True always yields a collection
        for start in range(0, len(rows), CHROMA_WRITE_BATCH):
            batch = rows[start : start + CHROMA_WRITE_BATCH]
            if start:
                time.sleep(CHROMA_YIELD_S)
            col.upsert(
                ids=[r.id for r in batch], embeddings=[r.embedding for r in batch],
                metadatas=[{"chunk_id": r.chunk_id, "knowledge_id": r.knowledge_id} for r in batch],
            )
            # A search brings the vector index up to date with what was just written. Left to itself,
            # Chroma applied all 4,579 rows of a document at the next delete or search, in one call of
            # ~0.5-0.7 s holding the GIL: the one long stall left in benchmarks/loop_stall.py.
            col.query(query_embeddings=[batch[0].embedding], n_results=1, include=[])

    def delete_chunks_sync(self, kb_id: str, chunk_ids: list[str]) -> None:
        col = self._collection(kb_id, create=False)
        for start in range(0, len(chunk_ids), CHROMA_WRITE_BATCH):
            if col is not None:  # the rows' ids first, then a delete by id: 3x faster than a delete by metadata, and short calls
                if start:
                    time.sleep(CHROMA_YIELD_S)
                rows = col.get(where={"chunk_id": {"$in": chunk_ids[start : start + CHROMA_WRITE_BATCH]}}, include=[])["ids"]
                if rows:
                    time.sleep(CHROMA_YIELD_S)
                    col.delete(ids=rows)

    def delete_kb_sync(self, kb_id: str) -> None:
        self._collections.pop(kb_id, None)
        try:
            self.client.delete_collection(collection_name(kb_id))
        except Exception:  # already gone: deleting twice is not an error
            pass

    def delete_image_spaces_sync(self, kb_id: str) -> None:
        prefix = image_spaces_prefix(kb_id)
        names = [getattr(c, "name", c) for c in self.client.list_collections()]  # names or collections, by client version
        for name in names:
            if name.startswith(collection_name(prefix)):
                self.delete_kb_sync(name[len(collection_name("")):])

    def query_sync(self, kb_id: str, embedding: list[float], top_k: int, knowledge_ids: list[str] | None = None,
                   hidden: Hidden = NOTHING_HIDDEN) -> VectorQueryResult:
        col = self._collection(kb_id, create=False)
        if col is None or top_k <= 0:
            return VectorQueryResult([], False)
        hidden_chunks = hidden.chunks if hidden and not knowledge_ids else None
        if hidden_chunks is not None:
            found = self._nearest_readable(col, embedding, top_k, hidden_chunks)
            if found is not None:
                return found
        # Distances only, no count() first: Chroma returns fewer rows when it has fewer, and the
        # chunk id is read from the row id. Fetching metadatas tripled the cost of a 500-row query.
        res = col.query(query_embeddings=[embedding], n_results=top_k, where=_where(knowledge_ids, hidden.documents), include=["distances"])
        return _hits(res["ids"][0], res["distances"][0], top_k)

    def _nearest_readable(self, col: Any, embedding: list[float], top_k: int, hidden_chunks: frozenset[str]) -> VectorQueryResult | None:
        """The nearest rows of readable documents from a deeper query without a filter (distances
        only: a row's chunk id is its id, checked against the hidden documents' chunks), or None when
        too few of them were among it, also once deeper. Any `where` costs Chroma ~30 ms whatever it
        holds (a `$nin` of 8,000 ids or of 100), ten times an unfiltered query of this depth."""
        readable_share = max(1.0 - len(hidden_chunks) / max(self._row_count(col), 1), 0.01)
        depth = min(math.ceil(top_k * CHROMA_OVERFETCH_MARGIN / readable_share), CHROMA_OVERFETCH_MAX)
        while True:
            res = col.query(query_embeddings=[embedding], n_results=depth, include=["distances"])
            rows = [(row_id, dist) for row_id, dist in zip(res["ids"][0], res["distances"][0]) if chunk_id_of(row_id) not in hidden_chunks]
            exhausted = len(res["ids"][0]) < depth  # the collection holds no more rows: what is readable is all here
            if len(rows) >= top_k or exhausted:
                return _hits([r for r, _ in rows[:top_k]], [d for _, d in rows[:top_k]], top_k)
            if depth >= CHROMA_OVERFETCH_MAX:
                return None
            depth = min(depth * CHROMA_OVERFETCH_RETRY, CHROMA_OVERFETCH_MAX)

    def _row_count(self, col: Any) -> int:
        name = getattr(col, "name", "")
        kept = self._row_counts.get(name)
        if kept is not None and kept[0] > time.monotonic():
            return kept[1]
        count = int(col.count())
        self._row_counts[name] = (time.monotonic() + ROW_COUNT_TTL_S, count)
        return count

    def embeddings_sync(self, kb_id: str, row_ids: list[str]) -> dict[str, list[float]]:
        col = self._collection(kb_id, create=False)
        if col is None or not row_ids:
            return {}
        got = col.get(ids=list(row_ids), include=["embeddings"])
        return {rid: [float(x) for x in vec] for rid, vec in zip(got["ids"], got["embeddings"])}
