"""Memory stores under test (in memory and SQLite) and the real local embedder with a session cache."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph.store.base import BaseStore

from ragline.memory.store import open_memory_store
from ragline.models.embeddings import Embedder, EmbeddingCache


@pytest.fixture(scope="session")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> Embedder:
    cache = EmbeddingCache(tmp_path_factory.mktemp("memory-embeddings") / "cache.sqlite")
    return Embedder(model="ragline/multilingual-e5-small", cache=cache)




@pytest.fixture(params=["memory", "sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseStore]:
    redis_url = None
    if request.param == "redis":
        server = request.getfixturevalue("redis_server")
        server.flush()
        redis_url = server.url
    store = open_memory_store(request.param, tmp_path / "memory.sqlite", redis_url)
    yield store
    if hasattr(store, "close"):
        store.close()
