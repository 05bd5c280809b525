"""Keyword (BM25) index behind a small interface; bm25s serves the embedded default.

Replaces the keyword side of the seed's retrieve engines (the KeywordsRetriever of
CompositeRetrieveEngine). The bm25s index is derived from the catalog's token column and rebuilt
when the KB's revision moves, so it can never disagree with what the catalog (and therefore the
vector store) holds. rank-bm25 scores every document in Python (23 ms a query at 11k documents
here); bm25s answers from a sparse matrix in a fraction of a millisecond, so it serves queries and
rank-bm25 stays the reference the tests compare against.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Protocol

import bm25s
import numpy as np

from ragline import defaults
from ragline.retrieval.catalog import Catalog, ChunkRecord
from ragline.retrieval.types import NOTHING_HIDDEN, Hidden

HIDDEN_MASKS = 16  # readers' hidden-document masks a snapshot keeps


@dataclass(frozen=True)
class KeywordHit:
    chunk_id: str
    score: float  # raw BM25; the searcher normalises to [0,1]


class KeywordIndex(Protocol):
    """What HybridSearch needs from a keyword engine."""

    async def write(self, kb_id: str, chunks: list[ChunkRecord]) -> None: ...

    async def delete_chunks(self, kb_id: str, chunk_ids: list[str]) -> None: ...

    async def delete_kb(self, kb_id: str) -> None: ...

    async def search(
        self, kb_id: str, tokens: list[str], top_k: int, knowledge_ids: list[str] | None = None,
        hidden: Hidden = NOTHING_HIDDEN,
    ) -> list[KeywordHit]:
        """The best BM25 chunks, of `knowledge_ids` only when given, never of a `hidden` document."""
        ...


@dataclass
class _Snapshot:
    revision: int
    retriever: bm25s.BM25 | None
    chunk_ids: np.ndarray
    document_codes: np.ndarray  # each chunk's document as an integer: masks compare integers, not strings
    code_of: dict[str, int]  # document id -> its code
    _hidden_masks: OrderedDict[frozenset[str], np.ndarray] = field(default_factory=OrderedDict)  # a reader's hidden documents -> its mask

    @classmethod
    def of(cls, revision: int, retriever: bm25s.BM25 | None, chunk_ids: list[str], knowledge_ids: list[str]) -> _Snapshot:
        code_of: dict[str, int] = {}
        codes = np.fromiter((code_of.setdefault(k, len(code_of)) for k in knowledge_ids), dtype=np.int64, count=len(knowledge_ids))
        return cls(revision, retriever, np.asarray(chunk_ids, dtype=object), codes, code_of)

    def of_documents(self, knowledge_ids: Collection[str]) -> np.ndarray:
        """Which chunks belong to one of these documents (a set lookup per document, not per chunk pair)."""
        codes = [self.code_of[k] for k in knowledge_ids if k in self.code_of]
        return np.isin(self.document_codes, np.asarray(codes, dtype=np.int64))

    def of_hidden(self, documents: frozenset[str]) -> np.ndarray:
        """`of_documents` of a reader's hidden documents, kept for the snapshot's life: the same
        reader asks again with the same set (the searcher keeps it), and it spans thousands of ids."""
        mask = self._hidden_masks.get(documents)
        if mask is None:
            mask = self.of_documents(documents)
            self._hidden_masks[documents] = mask
            while len(self._hidden_masks) > HIDDEN_MASKS:
                self._hidden_masks.popitem(last=False)
        return mask


class Bm25sKeywordIndex:
    """In-process bm25s indexes, one per KB, rebuilt lazily from the catalog."""

    def __init__(self, catalog: Catalog, k1: float = defaults.BM25_K1, b: float = defaults.BM25_B, method: str = "lucene") -> None:
        self.catalog = catalog
        self.k1, self.b, self.method = k1, b, method
        self._snapshots: dict[str, _Snapshot] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    # Writes land in the catalog; the next search sees the new revision and rebuilds.
    async def write(self, kb_id: str, chunks: list[ChunkRecord]) -> None:
        return None

    async def delete_chunks(self, kb_id: str, chunk_ids: list[str]) -> None:
        return None

    async def delete_kb(self, kb_id: str) -> None:
        self._snapshots.pop(kb_id, None)

    def build(self, tokens: list[list[str]]) -> bm25s.BM25 | None:
        if not tokens:
            return None
        retriever = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
        retriever.index(tokens, show_progress=False)
        return retriever

    def snapshot(self, kb_id: str) -> _Snapshot:
        """The current index of a KB, rebuilt under a per-KB lock when the catalog moved on."""
        revision = self.catalog.kb_revision(kb_id)
        current = self._snapshots.get(kb_id)
        if current is not None and current.revision == revision:
            return current
        with self._guard:
            lock = self._locks.setdefault(kb_id, threading.Lock())
        with lock:
            current = self._snapshots.get(kb_id)
            if current is not None and current.revision == self.catalog.kb_revision(kb_id):
                return current
            corpus = self.catalog.keyword_corpus(kb_id)
            fresh = _Snapshot.of(corpus.revision, self.build(corpus.tokens), corpus.chunk_ids, corpus.knowledge_ids)
            self._snapshots[kb_id] = fresh
            return fresh

    def search_sync(self, kb_id: str, tokens: list[str], top_k: int, knowledge_ids: list[str] | None = None,
                    hidden: Hidden = NOTHING_HIDDEN) -> list[KeywordHit]:
        snap = self.snapshot(kb_id)
        if snap.retriever is None or not tokens or top_k <= 0:
            return []
        scores = snap.retriever.get_scores(tokens)
        if knowledge_ids:
            scores = np.where(snap.of_documents(knowledge_ids), scores, 0.0)
        if hidden:
            scores = np.where(snap.of_hidden(hidden.documents), 0.0, scores)
        k = min(top_k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [KeywordHit(str(snap.chunk_ids[i]), float(scores[i])) for i in top if scores[i] > 0]

    async def search(self, kb_id: str, tokens: list[str], top_k: int, knowledge_ids: list[str] | None = None,
                     hidden: Hidden = NOTHING_HIDDEN) -> list[KeywordHit]:
        # off the event loop: even a fresh index reads its revision from the catalog (a file) first
        return await asyncio.to_thread(self.search_sync, kb_id, tokens, top_k, knowledge_ids, hidden)
