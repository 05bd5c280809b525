"""One Embedder per embedding-model identity, sharing the vector cache (seed: GetQueryEmbedding
per ResolveEmbeddingModelKeys group)."""

from __future__ import annotations

from ragline.models.embeddings import Embedder
from ragline.retrieval.types import KnowledgeBase


class EmbedderPool:
    def __init__(self, default: Embedder) -> None:
        self.default = default
        self._by_key: dict[str, Embedder] = {default.identity.key: default}

    def for_kb(self, kb: KnowledgeBase) -> Embedder:
        if kb.embedding_key not in self._by_key:
            self._by_key[kb.embedding_key] = Embedder(
                model=kb.embedding_model, api_base=kb.embedding_base_url or None,
                batch_size=self.default.batch_size, cache=self.default.cache,
                timeout=self.default.timeout, retry=self.default.retry,
            )
        return self._by_key[kb.embedding_key]
