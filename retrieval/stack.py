"""Wiring: the catalog, stores, embedders, searcher and KB service built once from settings.

Replaces the seed's DI container registrations (internal/container/container.go) for retrieval.
Two modes, chosen by RetrievalConfig alone: embedded (no URL: a SQLite catalog, a Chroma folder
and bm25s under the data directory) and shared (redis_url: catalog, vectors and keywords in Redis,
nothing of them on local disk, so replicas share the knowledge bases). A chroma_url keeps vectors
on that Chroma server in either mode.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ragline.models.embeddings import Embedder, EmbeddingCache
from ragline.retrieval.catalog import Catalog, SqliteCatalog
from ragline.retrieval.config import RetrievalConfig
from ragline.retrieval.embedders import EmbedderPool
from ragline.retrieval.hybrid import HybridSearcher, StoreEngines
from ragline.retrieval.keyword_index import Bm25sKeywordIndex, KeywordIndex
from ragline.retrieval.knowledge_base import KnowledgeBaseService
from ragline.retrieval.vector_store import ChromaVectorStore, VectorStore

if TYPE_CHECKING:
    import redis


@dataclass
class RetrievalStack:
    catalog: Catalog
    stores: dict[str, StoreEngines]
    embedders: EmbedderPool
    searcher: HybridSearcher
    knowledge_bases: KnowledgeBaseService
    config: RetrievalConfig

    @classmethod
    def build(cls, data_dir: Path, embedder: Embedder, config: RetrievalConfig | None = None,
              keyword: KeywordIndex | None = None) -> RetrievalStack:
        """The stores `config` names: under `data_dir` in embedded mode, in Redis in shared mode."""
        settings = config or RetrievalConfig()
        shared = _connect(settings.redis_url) if settings.redis_url else None  # one pool for all three stores
        catalog = open_catalog(data_dir, shared)
        vector = open_vector_store(data_dir, settings, shared)
        if keyword is None and shared is not None:
            from ragline.retrieval.redis_keyword import RedisKeywordIndex

            keyword = RedisKeywordIndex(shared, catalog)
        keyword = keyword or Bm25sKeywordIndex(catalog, k1=settings.bm25_k1, b=settings.bm25_b)
        stores = {"default": StoreEngines(vector, keyword)}
        embedders = EmbedderPool(embedder)
        return cls(
            catalog=catalog, stores=stores, embedders=embedders,
            searcher=HybridSearcher(catalog, stores, embedders, settings),
            knowledge_bases=KnowledgeBaseService(catalog, stores, embedder.identity.name, embedder.identity.base_url),
            config=settings,
        )


def _connect(url: str) -> redis.Redis:
    from ragline.retrieval.redis_connect import connect_search  # embedded mode never imports redis here

    return connect_search(url)


def open_catalog(data_dir: Path, shared: redis.Redis | None = None) -> Catalog:
    """The catalog in the shared Redis when there is one, else `data_dir/catalog.sqlite`."""
    if shared is not None:
        from ragline.retrieval.redis_catalog import RedisCatalog

        return RedisCatalog(shared)
    return SqliteCatalog(data_dir / "catalog.sqlite")


def open_vector_store(data_dir: Path, config: RetrievalConfig, shared: redis.Redis | None = None) -> VectorStore:
    """A Chroma server when chroma_url names one, else the shared Redis, else the Chroma folder `data_dir/chroma`."""
    if config.chroma_url:
        return ChromaVectorStore.http(config.chroma_url, config.hnsw_ef_search, config.hnsw_max_neighbors)
    if shared is not None:
        from ragline.retrieval.redis_vectors import RedisVectorStore

        return RedisVectorStore(shared, config.hnsw_ef_search, config.hnsw_max_neighbors)
    return ChromaVectorStore.persistent(data_dir / "chroma", config.hnsw_ef_search, config.hnsw_max_neighbors)


def local_embedder(cache_path: Path, model: str = "ragline/multilingual-e5-small") -> Embedder:
    """The local default model with a cache at `cache_path` (tests, scratch evaluations)."""
    return Embedder(model=model, cache=EmbeddingCache(cache_path))
