"""Where Ragline keeps what MCP OAuth gives it: each user's tokens for a server, the client
registration a server gave Ragline, and the authorizations a user has yet to finish (used once).

Three stores behind one protocol, chosen like the service's other stores: in memory, SQLite
(embedded, beside the checkpoints) and Redis (shared, so the browser's return to any replica
finishes an authorization another replica started). Values are JSON text; a key may expire.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Protocol


class CredentialStore(Protocol):
    async def get(self, key: str) -> str | None: ...

    async def put(self, key: str, value: str, *, ttl_s: float | None = None) -> None: ...

    async def take(self, key: str) -> str | None:
        """The value, deleted in the same step: only one caller ever gets it."""
        ...

    async def delete(self, key: str) -> None: ...


class MemoryCredentialStore:
    def __init__(self) -> None:
        self._values: dict[str, tuple[str, float | None]] = {}

    def _live(self, key: str) -> str | None:
        found = self._values.get(key)
        if found is None or (found[1] is not None and found[1] < time.time()):
            self._values.pop(key, None)
            return None
        return found[0]

    async def get(self, key: str) -> str | None:
        return self._live(key)

    async def put(self, key: str, value: str, *, ttl_s: float | None = None) -> None:
        self._values[key] = (value, time.time() + ttl_s if ttl_s else None)

    async def take(self, key: str) -> str | None:
        value = self._live(key)
        self._values.pop(key, None)
        return value

    async def delete(self, key: str) -> None:
        self._values.pop(key, None)


_SCHEMA = "CREATE TABLE IF NOT EXISTS credentials (key TEXT PRIMARY KEY, value TEXT NOT NULL, expires REAL)"


class SqliteCredentialStore:
    """One table; calls run in a worker thread so the event loop never waits on the disk."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(_SCHEMA)

    def _get(self, key: str, *, delete: bool) -> str | None:
        with self._lock:
            rows = self._conn.execute("SELECT value, expires FROM credentials WHERE key=?", (key,)).fetchall()
            if rows and (delete or (rows[0][1] is not None and rows[0][1] < time.time())):
                self._conn.execute("DELETE FROM credentials WHERE key=?", (key,))
            if not rows or (rows[0][1] is not None and rows[0][1] < time.time()):
                return None
            return str(rows[0][0])

    def _put(self, key: str, value: str, expires: float | None) -> None:
        with self._lock:
            self._conn.execute("INSERT OR REPLACE INTO credentials VALUES (?, ?, ?)", (key, value, expires))

    async def get(self, key: str) -> str | None:
        return await asyncio.to_thread(self._get, key, delete=False)

    async def put(self, key: str, value: str, *, ttl_s: float | None = None) -> None:
        await asyncio.to_thread(self._put, key, value, time.time() + ttl_s if ttl_s else None)

    async def take(self, key: str) -> str | None:
        return await asyncio.to_thread(self._get, key, delete=True)

    async def delete(self, key: str) -> None:
        await asyncio.to_thread(self._get, key, delete=True)


def _text(value: bytes | str | None) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


class RedisCredentialStore:
    """<prefix>:mcp-oauth:<key> strings, with Redis's own expiry."""

    def __init__(self, redis: Any, *, prefix: str = "ragline") -> None:
        self.redis = redis  # redis.asyncio.Redis
        self.prefix = prefix

    def _k(self, key: str) -> str:
        return f"{self.prefix}:mcp-oauth:{key}"

    async def get(self, key: str) -> str | None:
        return _text(await self.redis.get(self._k(key)))

    async def put(self, key: str, value: str, *, ttl_s: float | None = None) -> None:
        await self.redis.set(self._k(key), value, px=int(ttl_s * 1000) if ttl_s else None)

    async def take(self, key: str) -> str | None:
        return _text(await self.redis.getdel(self._k(key)))

    async def delete(self, key: str) -> None:
        await self.redis.delete(self._k(key))
