"""Long-term memory in a shared deployment (issue 12): with RAGLINE_REDIS_URL set, the memory
store follows the backend into the real Redis 8 of the tests, so a memory added through one
replica's services is listed and recalled through another's, and no replica writes memory.sqlite.
An explicit memory_store still wins over the backend's default."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from ragline.memory.service import Caller
from ragline.memory.store import memory_store_kind
from ragline.models.embeddings import Embedder
from ragline.services import Services
from ragline.settings import Settings
from tests.redis_server import RedisServer

ALICE = Caller("acme", "alice@acme.example")


@pytest.fixture
async def replicas(redis_server: RedisServer, embedder: Embedder, tmp_path: Path) -> AsyncIterator[Callable[..., Services]]:
    """Services of a replica with its own data directory, on the session's (flushed) Redis."""
    redis_server.flush()
    made: list[Services] = []

    def replica(name: str, **overrides: object) -> Services:
        settings = Settings(redis_url=redis_server.url, data_dir=tmp_path / name, **overrides)  # type: ignore[arg-type]
        services = Services(settings, embedder_factory=lambda: embedder)
        made.append(services)
        return services

    yield replica
    for services in made:
        await services.aclose()


def test_the_memory_store_follows_the_backend_unless_one_is_named():
    assert memory_store_kind(None, "redis://r:6379/0") == "redis"
    assert memory_store_kind(None, None) == "sqlite"
    assert memory_store_kind("memory", "redis://r:6379/0") == "memory"
    assert Settings(redis_url=None, memory_store=None).memory_store is None  # resolved by the composition root


async def test_a_memory_added_on_one_replica_is_recalled_on_another_and_no_replica_writes_a_file(replicas, tmp_path):
    a, b = replicas("a"), replicas("b")
    added = await a.memory.add(ALICE, "The user prefers answers in German.")
    await a.memory.add(ALICE, "The user works on a Rust project called Ferris.")

    assert [m.id for m in await b.memory.list(ALICE)][-1] == added.id
    recalled = await b.memory.search(ALICE, "Which language should you answer in?", limit=1)
    assert [m.text for m in recalled] == ["The user prefers answers in German."]
    assert await b.memory.delete(ALICE, added.id) is True
    assert [m.text for m in await a.memory.list(ALICE)] == ["The user works on a Rust project called Ferris."]
    assert sorted(p.name for p in tmp_path.rglob("memory.sqlite*")) == []


async def test_an_explicit_sqlite_memory_store_stays_local_in_shared_mode(replicas, tmp_path):
    local = replicas("local", memory_store="sqlite")
    await local.memory.add(ALICE, "The user is allergic to peanuts.")
    assert (tmp_path / "local" / "memory.sqlite").is_file()
    assert await replicas("other").memory.list(ALICE) == []
