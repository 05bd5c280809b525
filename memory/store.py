"""The LangGraph store that holds long-term memories: in memory, SQLite under the data dir, or Redis.

The composition root (ragline.services.Services) opens it once; memory_recall and the memory
commands reach it through `Services.memory`. The SQLite store is LangGraph's own (langgraph-checkpoint-sqlite) with its async
API run in a worker thread: its sync connection is safe across threads (it locks), so one store
serves every event loop, and no aiosqlite connection is tied to the loop that opened it. Memory
search embeds with Ragline's embedder (memory/service.py), so no store-side vector index (and no
sqlite-vec extension, which this Python's sqlite3 cannot load) is needed.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from langgraph.store.base import BaseStore, Op, Result
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore


class ThreadedSqliteStore(SqliteStore):
    """SqliteStore whose async calls run the sync batch in a worker thread: a read waits for the
    file (and for a writer in another process), which the event loop must never do. (An earlier
    shortcut answered searches of empty namespaces with a read on the loop, ~10-20% less server CPU
    for a plain-chat turn by benchmarks/turn_cost.py; `langgraph dev` rejected it as blocking.)"""

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

    from ragline.redis_clients import sync_client

    store = RedisStore(sync_client(url))
    store.setup()
    return store


def memory_store_kind(kind: str | None, redis_url: str | None) -> str:
    """The configured kind, else the backend's: a shared deployment keeps memories in its Redis,
    where every replica reads them (a file under one replica's data_dir would be seen by it alone)."""
    return kind or ("redis" if redis_url else "sqlite")


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
