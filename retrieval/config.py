"""How retrieval is tuned: fusion, BM25, HNSW and feedback (seed: RetrievalConfig, knowledgebase_search*.go).

Not a settings class of its own: the one `ragline.settings.Settings` carries these values
(env prefix RAGLINE_), and `RetrievalConfig.from_settings` hands them to the retrieval stack.
Tests and benchmarks build a RetrievalConfig directly.
"""

from __future__ import annotations

from pydantic import ConfigDict

from ragline.settings import RetrievalFields, Settings


class RetrievalConfig(RetrievalFields):
    """Where the shared stores are (Chroma/Redis servers) and how fusion is weighted (frozen)."""

    model_config = ConfigDict(frozen=True)

    @classmethod
    def from_settings(cls, settings: Settings) -> RetrievalConfig:
        return cls(**{name: getattr(settings, name) for name in cls.model_fields})
