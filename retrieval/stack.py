"""Wiring: the catalog, stores, embedders, searcher and KB service built once from settings.

Replaces the seed's DI container registrations (internal/container/container.go) for retrieval.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ragline.models.embeddings import Embedder, EmbeddingCache
from ragline.retrieval.catalog import Catalog
from ragline.retrieval.config import RetrievalConfig
from ragline.retrieval.embedders import EmbedderPool
from ragline.retrieval.hybrid import HybridSearcher, StoreEngines
from ragline.retrieval.keyword_index import Bm25sKeywordIndex, KeywordIndex
from ragline.retrieval.knowledge_base import KnowledgeBaseService
from ragline.retrieval.vector_store import ChromaVectorStore


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
        """Everything under `data_dir`; Chroma and Redis servers are used when their URLs are set."""
        settings = config or RetrievalConfig()
        catalog = Catalog(data_dir / "catalog.sqlite")
        if settings.chroma_url:
            vector = ChromaVectorStore.http(settings.chroma_url, settings.hnsw_ef_search, settings.hnsw_max_neighbors)
        else:
            vector = ChromaVectorStore.persistent(data_dir / "chroma", settings.hnsw_ef_search, settings.hnsw_max_neighbors)
        if keyword is None and settings.redis_url:
            from ragline.retrieval.redis_keyword import RedisKeywordIndex

            keyword = RedisKeywordIndex.from_url(settings.redis_url, catalog)
        keyword = keyword or Bm25sKeywordIndex(catalog, k1=settings.bm25_k1, b=settings.bm25_b)
        stores = {"default": StoreEngines(vector, keyword)}
        embedders = EmbedderPool(embedder)
        return cls(
            catalog=catalog, stores=stores, embedders=embedders,
            searcher=HybridSearcher(catalog, stores, embedders, settings),
            knowledge_bases=KnowledgeBaseService(catalog, stores, embedder.identity.name, embedder.identity.base_url),
            config=settings,
        )


def local_embedder(cache_path: Path, model: str = "ragline/multilingual-e5-small") -> Embedder:
    """The local default model with a cache at `cache_path` (tests, scratch evaluations)."""
    return Embedder(model=model, cache=EmbeddingCache(cache_path))
