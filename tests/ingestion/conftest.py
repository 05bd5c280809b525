"""Fixtures: the real local embedder (vectors cached for the whole session) and a stack in a tmp dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragline.ingestion.service import IngestionService
from ragline.models.embeddings import Embedder, EmbeddingCache
from ragline.retrieval.config import RetrievalSettings
from ragline.retrieval.stack import RetrievalStack


@pytest.fixture(scope="session")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> Embedder:
    cache = EmbeddingCache(tmp_path_factory.mktemp("embeddings") / "cache.sqlite")
    return Embedder(model="ragline/multilingual-e5-small", cache=cache)


@pytest.fixture
def stack(tmp_path: Path, embedder: Embedder) -> RetrievalStack:
    return RetrievalStack.build(tmp_path, embedder, RetrievalSettings(data_dir=tmp_path, redis_url=None, chroma_url=None))


@pytest.fixture
def ingestion(stack: RetrievalStack) -> IngestionService:
    return IngestionService(stack)
