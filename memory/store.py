"""The LangGraph store that holds long-term memories: in memory, SQLite under the data dir, or Redis.

A host compiles the graph with this store (`graph.compile(store=...)`); nodes then reach it as
`runtime.store`. The SQLite store is LangGraph's own (langgraph-checkpoint-sqlite) with its async
API run in a worker thread: its sync connection is safe across threads (it locks), so one store
serves every event loop, and no aiosqlite connection is tied to the loop that opened it. Memory
search embeds with Ragline's embedder (memory/service.py), so no store-side vector index (and no
sqlite-vec extension, which this Python's sqlite3 cannot load) is needed.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path

from langgraph.store.base import BaseStore, Op, Result
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore
from ragline.models.embeddings import Embedder

from ragline.settings import Settings, get_settings


class ThreadedSqliteStore(SqliteStore):
    """SqliteStore whose async calls run the sync batch in a worker thread."""

    @classmethod
    def open(cls, path: Path) -> ThreadedSqliteStore:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        store = cls(conn)
        store.setup()
        return store

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    def close(self) -> None:
        self.conn.close()


class MemoryStoreError(ValueError):
    """An unknown store kind in the settings."""


def open_redis_store(url: str) -> BaseStore:
    """langgraph-checkpoint-redis's RedisStore (Redis 8 with search + JSON): shared by replicas.
    Its sync client is thread-safe and its async calls run in a worker thread, so one store
    serves every event loop."""
    from langgraph.store.redis import RedisStore
    from redis import Redis

    store = RedisStore(Redis.from_url(url))
    store.setup()
    return store


def open_memory_store(kind: str, path: Path | None = None, redis_url: str | None = None) -> BaseStore:
    if kind == "memory":
        return InMemoryStore()
    if kind == "sqlite":
        if path is None:
            raise MemoryStoreError("the sqlite memory store needs a path")
        return ThreadedSqliteStore.open(path)
    if kind == "redis":
        if not redis_url:
            raise MemoryStoreError("memory_store=redis needs RAGLINE_REDIS_URL")
        return open_redis_store(redis_url)
    raise MemoryStoreError(f"unknown memory store {kind!r}; choose sqlite, memory or redis")


_stores: dict[tuple[str, str], BaseStore] = {}
_stores_lock = threading.Lock()


def memory_store_from_settings(settings: Settings | None = None) -> BaseStore:
    """The process's memory store for the current settings (one per kind and data directory)."""
    settings = settings or get_settings()
    path = settings.data_dir / "memory.sqlite"
    key = (settings.memory_store, settings.redis_url if settings.memory_store == "redis" else str(path))
    with _stores_lock:
        if key not in _stores:
            _stores[key] = open_memory_store(settings.memory_store, path, settings.redis_url)
        return _stores[key]


_embedders: dict[tuple[str, str | None, str], Embedder] = {}


def memory_embedder(settings: Settings | None = None) -> Embedder:
    """The configured embedding model with its cache, built once per process (memory search)."""
    settings = settings or get_settings()
    key = (settings.embedding_model, settings.embedding_api_base, str(settings.data_dir))
    with _stores_lock:
        if key not in _embedders:
            _embedders[key] = Embedder.from_settings(settings)
        return _embedders[key]
