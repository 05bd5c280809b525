"""Deployment settings of the retrieval and ingestion packages (env prefix RAGLINE_).

Seed numbers that `ragline.defaults` does not carry yet live here, each with its reason, until
they move there. Replaces the RetrievalConfig / chunking config of the seed's knowledge base
service (knowledgebase_search*.go, the document parser's chunking defaults).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from ragline import defaults
from ragline.settings import get_settings

# --- chunking (the Go system's splitter defaults) ---
DEFAULT_CHUNK_SIZE = 512  # characters per chunk
DEFAULT_CHUNK_OVERLAP = 80  # characters repeated between neighbours so a sentence is not cut blind
DEFAULT_PARENT_CHUNK_SIZE = 4096  # parent chunks give the model wide context...
DEFAULT_CHILD_CHUNK_SIZE = 384  # ...while small children keep the vectors precise

# --- bm25 ---
BM25_K1 = 1.5  # term-frequency saturation; best or level on all three shared sets (1.2 lost 0.005 on Cranfield)
BM25_B = 0.75  # length normalisation (Lucene default)


class RetrievalSettings(BaseSettings):
    """Where the stores live and how fusion is weighted; one instance per process."""

    model_config = SettingsConfigDict(env_prefix="RAGLINE_", env_file=".env", extra="ignore")

    data_dir: Path | None = Field(None, description="Overrides ragline.settings data_dir for retrieval data.")
    chroma_url: str | None = Field(None, description="Chroma server URL (HTTP client); default: a folder under data_dir.")
    redis_url: str | None = Field(None, description="Redis URL: keywords go to Redis full-text search, shared by replicas.")
    fusion: Literal["zscore", "rrf"] = Field(
        "zscore", description="zscore: weighted z-scores (measured best here); rrf: the seed's weighted RRF.")
    fusion_vector_weight: float = Field(0.6, ge=0, description="z-score fusion: weight of the vector side.")
    fusion_keyword_weight: float = Field(0.4, ge=0, description="z-score fusion: weight of the keyword side.")
    rrf_k: int = Field(defaults.RRF_K, ge=1, description="Reciprocal-rank-fusion constant.")
    rrf_vector_weight: float = Field(defaults.RRF_VECTOR_WEIGHT, ge=0, description="Weight of the vector ranks.")
    rrf_keyword_weight: float = Field(defaults.RRF_KEYWORD_WEIGHT, ge=0, description="Weight of the keyword ranks.")
    bm25_k1: float = Field(BM25_K1, gt=0)
    bm25_b: float = Field(BM25_B, ge=0, le=1)
    store_group_timeout_s: float = Field(defaults.STORE_GROUP_TIMEOUT_S, gt=0)
    hnsw_ef_search: int = Field(200, ge=10, description="Chroma HNSW search breadth; high enough to be near-exact.")
    hnsw_max_neighbors: int = Field(32, ge=4, description="Chroma HNSW M of new collections (Chroma's 16 lost rows here).")
    feedback_docs: int = Field(3, ge=0, description="Hybrid: fused hits whose vectors refine the query vector (0 = off).")
    feedback_weight: float = Field(0.5, ge=0, description="Hybrid: Rocchio beta, the weight of the hits' mean vector.")

    def resolved_data_dir(self) -> Path:
        return self.data_dir or get_settings().data_dir


@lru_cache(maxsize=1)
def get_retrieval_settings() -> RetrievalSettings:
    return RetrievalSettings()
