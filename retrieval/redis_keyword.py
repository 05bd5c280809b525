"""Keyword index in Redis full-text search (the search module's BM25 scorer), shared by replicas.

Replaces, for deployments with several replicas, the keyword side of the seed's retrieve engines
(the KeywordsRetriever of CompositeRetrieveEngine); the embedded default is bm25s
(keyword_index.py). Chunks are indexed as the catalog's tokens joined by spaces: our tokenizer
(jieba `cut_for_search` for Chinese, Snowball stems for English) has already run, so the index
has no stop words (STOPWORDS 0), no stemming (NOSTEM) and queries are VERBATIM. Redis' own
tokenizer then only splits at the spaces, and a Chinese word stays one term.

One search index per knowledge base (`ragline_kw_<kb id>`), so document frequencies are per KB,
as in bm25s. Scores are Redis' BM25STD: Lucene's BM25 with k1 = 1.2 and b = 0.5 fixed by the
module (bm25s serves k1 1.5, b 0.75 here; on Cranfield that setting is worth 0.36 vs 0.35 nDCG@10),
times the constant k1 + 1, which no ranking notices. Repeated query words count once per
occurrence in both engines. Document filters restrict the search to the documents' keys
(INKEYS): a TAG clause in the query would add its own BM25 term to every score.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Collection
from typing import Any

import redis
from redisvl.exceptions import RedisSearchError
from redisvl.index import SearchIndex
from redisvl.query import FilterQuery
from redisvl.utils.token_escaper import TokenEscaper

from ragline.retrieval.catalog import Catalog, ChunkRecord
from ragline.retrieval.keyword_index import KeywordHit
from ragline.retrieval.redis_connect import connect_search
from ragline.retrieval.types import NOTHING_HIDDEN, Hidden

_ESCAPER = TokenEscaper()
REDIS_BM25_K1 = 1.2  # fixed by the search module's BM25STD
REDIS_BM25_B = 0.5  # ditto (FT.SEARCH ... EXPLAINSCORE shows both)


def index_name(kb_id: str) -> str:
    return f"ragline_kw_{kb_id}"


def key_prefix(kb_id: str) -> str:
    return f"ragline:kw:{kb_id}"


def schema(kb_id: str) -> dict[str, Any]:
    """Hash documents with the chunk's tokens as the one full-text field."""
    return {
        "index": {"name": index_name(kb_id), "prefix": key_prefix(kb_id), "storage_type": "hash", "stopwords": []},
        "fields": [
            {"name": "chunk_id", "type": "tag"},
            {"name": "knowledge_id", "type": "tag"},
            {"name": "tokens", "type": "text", "attrs": {"no_stem": True}},
        ],
    }


def text_query(tokens: list[str], hidden: Collection[str] = ()) -> str:
    """A union of the tokens; duplicates kept, so a repeated word weighs twice (as in bm25s); never
    a chunk of a hidden document."""
    union = "@tokens:(" + "|".join(_ESCAPER.escape(t) for t in tokens) + ")"
    if not hidden:
        return union
    return f"({union}) -@knowledge_id:{{{'|'.join(_ESCAPER.escape(k) for k in sorted(hidden))}}}"


class RedisKeywordIndex:
    """BM25 over Redis search indexes; the catalog stays the source of truth.

    An index missing in Redis (a KB ingested before Redis was configured, or a flushed server) is
    created and filled from the catalog the first time the KB is written or searched.
    """

    def __init__(self, client: redis.Redis, catalog: Catalog) -> None:
        self.client = client
        self.catalog = catalog
        self._ready: set[str] = set()
        self._lock = threading.Lock()

    @classmethod
    def from_url(cls, url: str, catalog: Catalog) -> RedisKeywordIndex:
        return cls(connect_search(url), catalog)

    def _index(self, kb_id: str) -> SearchIndex:
        return SearchIndex.from_dict(schema(kb_id), redis_client=self.client)

    def ensure_sync(self, kb_id: str) -> SearchIndex:
        """The KB's index, created and back-filled from the catalog when Redis does not have it."""
        index = self._index(kb_id)
        if kb_id in self._ready:
            return index
        with self._lock:
            if kb_id not in self._ready:
                if not index.exists():
                    index.create(overwrite=False)
                    corpus = self.catalog.keyword_corpus(kb_id)
                    self._load(index, [(c, k, t) for c, k, t in zip(corpus.chunk_ids, corpus.knowledge_ids, corpus.tokens)])
                self._ready.add(kb_id)
        return index

    @staticmethod
    def _load(index: SearchIndex, rows: list[tuple[str, str, list[str]]]) -> None:
        # Chunks without tokens are stored too: they count in N (the idf), as in bm25s.
        records = [{"chunk_id": c, "knowledge_id": k, "tokens": " ".join(t)} for c, k, t in rows]
        if records:
            index.load(records, id_field="chunk_id")

    def write_sync(self, kb_id: str, chunks: list[ChunkRecord]) -> None:
        index = self.ensure_sync(kb_id)
        self._load(index, [(c.id, c.knowledge_id, c.tokens) for c in chunks if c.indexed])

    def delete_chunks_sync(self, kb_id: str, chunk_ids: list[str]) -> None:
        if chunk_ids:
            self._index(kb_id).drop_keys([f"{key_prefix(kb_id)}:{c}" for c in chunk_ids])

    def delete_kb_sync(self, kb_id: str) -> None:
        self._ready.discard(kb_id)
        index = self._index(kb_id)
        try:
            index.delete(drop=True)  # the index and every chunk key under it
        except RedisSearchError:
            if index.exists():  # already gone (deleted twice, or by another replica) is not an error
                raise

    def search_sync(self, kb_id: str, tokens: list[str], top_k: int,
                    knowledge_ids: list[str] | None = None, hidden: Hidden = NOTHING_HIDDEN) -> list[KeywordHit]:
        if not tokens or top_k <= 0:
            return []
        index = self.ensure_sync(kb_id)
        query = FilterQuery(text_query(tokens, hidden.documents), return_fields=["chunk_id"], num_results=top_k)
        query = query.scorer("BM25STD").with_scores().verbatim()
        if knowledge_ids:
            keys = [f"{key_prefix(kb_id)}:{c}" for c in self.catalog.chunk_ids_of(knowledge_ids)]
            if not keys:
                return []
            query = query.limit_ids(*keys)
        result = index.search(query.query, query_params=query.params)
        return [KeywordHit(doc.chunk_id, float(doc.score)) for doc in result.docs if float(doc.score) > 0]

    async def write(self, kb_id: str, chunks: list[ChunkRecord]) -> None:
        await asyncio.to_thread(self.write_sync, kb_id, chunks)

    async def delete_chunks(self, kb_id: str, chunk_ids: list[str]) -> None:
        await asyncio.to_thread(self.delete_chunks_sync, kb_id, chunk_ids)

    async def delete_kb(self, kb_id: str) -> None:
        await asyncio.to_thread(self.delete_kb_sync, kb_id)

    async def search(self, kb_id: str, tokens: list[str], top_k: int,
                     knowledge_ids: list[str] | None = None, hidden: Hidden = NOTHING_HIDDEN) -> list[KeywordHit]:
        # The sync client in a worker thread: one connection pool serves every event loop
        # (CLI runs, tests, the server), where an asyncio client is bound to the loop that made it.
        return await asyncio.to_thread(self.search_sync, kb_id, tokens, top_k, knowledge_ids, hidden)
