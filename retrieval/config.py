"""How retrieval is tuned: fusion, BM25, HNSW and feedback (seed: RetrievalConfig, knowledgebase_search*.go).

Not a settings class of its own: the one `ragline.settings.Settings` carries these values
(env prefix RAGLINE_), and `RetrievalConfig.from_settings` hands them to the retrieval stack.
Tests and benchmarks build a RetrievalConfig directly.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ragline import defaults
from ragline.settings import Settings


class RetrievalConfig(BaseModel):
    """Where the shared stores are (Chroma/Redis servers) and how fusion is weighted."""

    model_config = ConfigDict(frozen=True)

    chroma_url: str | None = Field(None, description="Chroma server URL (HTTP client); default: a folder under data_dir.")
    redis_url: str | None = Field(None, description="Redis URL: keywords go to Redis full-text search, shared by replicas.")
    fusion: Literal["zscore", "rrf"] = Field("zscore", description="zscore: weighted z-scores (measured best here); rrf: the seed's weighted RRF.")
    fusion_vector_weight: float = Field(defaults.ZSCORE_VECTOR_WEIGHT, ge=0, description="z-score fusion: weight of the vector side.")
    fusion_keyword_weight: float = Field(defaults.ZSCORE_KEYWORD_WEIGHT, ge=0, description="z-score fusion: weight of the keyword side.")
    rrf_k: int = Field(defaults.RRF_K, ge=1, description="Reciprocal-rank-fusion constant.")
    rrf_vector_weight: float = Field(defaults.RRF_VECTOR_WEIGHT, ge=0, description="Weight of the vector ranks.")
    rrf_keyword_weight: float = Field(defaults.RRF_KEYWORD_WEIGHT, ge=0, description="Weight of the keyword ranks.")
    bm25_k1: float = Field(defaults.BM25_K1, gt=0)
    bm25_b: float = Field(defaults.BM25_B, ge=0, le=1)
    store_group_timeout_s: float = Field(defaults.STORE_GROUP_TIMEOUT_S, gt=0)
    hnsw_ef_search: int = Field(defaults.HNSW_EF_SEARCH, ge=10, description="Chroma HNSW search breadth.")
    hnsw_max_neighbors: int = Field(defaults.HNSW_MAX_NEIGHBORS, ge=4, description="Chroma HNSW M of new collections.")
    feedback_docs: int = Field(defaults.FEEDBACK_DOCS, ge=0, description="Hybrid: fused hits whose vectors refine the query vector (0 = off).")
    feedback_weight: float = Field(defaults.FEEDBACK_WEIGHT, ge=0, description="Hybrid: Rocchio beta, the weight of the hits' mean vector.")

    @classmethod
    def from_settings(cls, settings: Settings) -> RetrievalConfig:
        return cls(**{name: getattr(settings, name) for name in cls.model_fields})
