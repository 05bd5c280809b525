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

from langgraph.store.base import BaseStore, Op, Result, SearchOp
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore


class ThreadedSqliteStore(SqliteStore):
    """SqliteStore whose async calls run the sync batch in a worker thread, except searches of
    namespaces that hold nothing (most callers have no memories): those answer at once. The hop
    cost more than the search (~50 µs): without it a plain-chat turn takes 10-23% less server CPU
    (benchmarks/turn_cost.py, medians of 3: 4.83/3.62/3.25 vs 5.35/4.72/3.73 ms at 1/4/32 turns in flight)."""

    @classmethod
    def open(cls, path: Path) -> ThreadedSqliteStore:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        store = cls(conn)
        store.setup()
        return store

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        if ops and all(isinstance(op, SearchOp) and not self._holds_any(op.namespace_prefix) for op in ops):
            return [[] for _ in ops]
        return await asyncio.to_thread(self.batch, ops)

    def _holds_any(self, namespace_prefix: tuple[str, ...]) -> bool:
        """Whether anything may be stored under the prefix: one indexed range read, on the caller's
        thread. A store busy in another thread counts as maybe (the caller must not wait for it here)."""
        if not namespace_prefix:
            return True
        text = ".".join(namespace_prefix)  # how SqliteStore writes a namespace: the namespace itself, or one below it
        if not self.lock.acquire(blocking=False):
            return True
        try:
            # every text that starts with "<text>." sorts from it up to "<text>/" ("/" follows "." in ASCII)
            row = self.conn.execute("SELECT 1 FROM store WHERE prefix = ? OR (prefix >= ? AND prefix < ?) LIMIT 1",
                                    (text, text + ".", text + "/")).fetchone()
        finally:
            self.lock.release()
        return row is not None

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
