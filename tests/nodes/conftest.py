"""A real knowledge stack (Chroma + bm25s + the local e5 embedder) in a temporary folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragline.ingestion.service import IngestionService
from ragline.models.embeddings import Embedder, EmbeddingCache
from ragline.retrieval.config import RetrievalSettings
from ragline.retrieval.stack import RetrievalStack
from ragline.services import Services


@pytest.fixture(scope="session")
def node_embedder(tmp_path_factory: pytest.TempPathFactory) -> Embedder:
    return Embedder(model="ragline/multilingual-e5-small", cache=EmbeddingCache(tmp_path_factory.mktemp("node-embeddings") / "cache.sqlite"))


@pytest.fixture
def stack(tmp_path: Path, node_embedder: Embedder) -> RetrievalStack:
    return RetrievalStack.build(tmp_path, node_embedder, RetrievalSettings(data_dir=tmp_path, redis_url=None, chroma_url=None))


@pytest.fixture
def services(stack: RetrievalStack) -> Services:
    return Services(retrieval_factory=lambda: stack)


@pytest.fixture
def ingestion(stack: RetrievalStack) -> IngestionService:
    return IngestionService(stack)
