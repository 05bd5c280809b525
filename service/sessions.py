"""Session records (seed: session.go): title, pin, owner; the conversation itself is the thread.

A session is a LangGraph thread whose id is the session id; this store keeps only what a
checkpoint does not: tenant, owner, title, pin, timestamps, fork origin. Three stores behind
one protocol: in memory, SQLite (embedded, survives restarts) and Redis (shared by replicas).
Listing is by tenant, pinned first, most recently updated next.
"""

from __future__ import annotations

import asyncio
import builtins
import sqlite3
import threading
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field
from redis.asyncio import Redis
from redis.exceptions import WatchError

from ragline.contracts.request import PipelineRequest


def utcnow() -> datetime:
    return datetime.now(UTC)


class LastRequestState(BaseModel):
    """The choices of the input line at the session's last question, restored when the user comes
    back (seed: UpdateSessionLastRequestState; for the UI only, never read by the pipeline)."""

    model_config = ConfigDict(extra="forbid")

    knowledge_base_ids: builtins.list[str] = Field(default_factory=list, max_length=100)
    knowledge_ids: builtins.list[str] = Field(default_factory=list, max_length=200)
    chat_model: str | None = Field(None, max_length=200)
    rerank_model: str | None = Field(None, max_length=200)
    web_search_enabled: bool = False
    chat_history_search: bool = False
    thinking: bool | None = None

    @classmethod
    def of(cls, request: PipelineRequest) -> LastRequestState:
        return cls(
            knowledge_base_ids=[*request.knowledge_base_ids, *(t.knowledge_base_id for t in request.search_targets)],
            knowledge_ids=list(request.knowledge_ids), chat_model=request.chat_model, rerank_model=request.rerank_model,
            web_search_enabled=request.web_search_enabled, chat_history_search=request.chat_history_search,
            thinking=request.summary.thinking,
        )


class Session(BaseModel):
    id: str = Field(default_factory=lambda: str(uuid.uuid4()))
    tenant_id: str
    owner_id: str
    title: str = ""
    description: str = ""
    pinned: bool = False
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    parent_session_id: str | None = None
    forked_from_message_id: str | None = None
    last_request_state: LastRequestState | None = None

    def sort_key(self) -> float:
        """Pinned first, then the most recently updated (a Redis sorted-set score)."""
        return (1e13 if self.pinned else 0.0) + self.updated_at.timestamp() * 1000


class SessionStore(Protocol):
    async def save(self, session: Session) -> None: ...

    async def get(self, session_id: str) -> Session | None: ...

    async def list(self, tenant_id: str, offset: int, limit: int) -> tuple[builtins.list[Session], int]: ...

    async def delete(self, sessions: builtins.list[Session]) -> None: ...

    async def patch(self, session_id: str, changes: dict[str, Any]) -> Session | None:
        """Change some fields in one step (a title and a touch never overwrite each other)."""
        ...

    async def aclose(self) -> None: ...


def _ordered(sessions: builtins.list[Session]) -> builtins.list[Session]:
    return sorted(sessions, key=lambda s: (s.sort_key(), s.id), reverse=True)


class MemorySessionStore:
    def __init__(self) -> None:
        self._sessions: dict[str, Session] = {}

    async def save(self, session: Session) -> None:
        self._sessions[session.id] = session.model_copy()

    async def get(self, session_id: str) -> Session | None:
        session = self._sessions.get(session_id)
        return session.model_copy() if session else None

    async def list(self, tenant_id: str, offset: int, limit: int) -> tuple[builtins.list[Session], int]:
        mine = _ordered([s for s in self._sessions.values() if s.tenant_id == tenant_id])
        return [s.model_copy() for s in mine[offset : offset + limit]], len(mine)

    async def delete(self, sessions: builtins.list[Session]) -> None:
        for session in sessions:
            self._sessions.pop(session.id, None)

    async def patch(self, session_id: str, changes: dict[str, Any]) -> Session | None:
        session = self._sessions.get(session_id)
        if session is None:
            return None
        self._sessions[session_id] = session.model_copy(update=changes)
        return self._sessions[session_id].model_copy()

    async def aclose(self) -> None:
        return None


_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, sort_key REAL NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS sessions_by_tenant ON sessions (tenant_id, sort_key DESC, id DESC);
"""


class SqliteSessionStore:
    """One table; calls run in a worker thread so the event loop never waits on the disk."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.executescript(_SCHEMA)

    def _run(self, sql: str, args: tuple = ()) -> builtins.list[tuple]:
        with self._lock:
            return self._conn.execute(sql, args).fetchall()

    async def save(self, session: Session) -> None:
        await asyncio.to_thread(
            self._run,
            "INSERT OR REPLACE INTO sessions VALUES (?, ?, ?, ?)",
            (session.id, session.tenant_id, session.sort_key(), session.model_dump_json()),
        )

    async def get(self, session_id: str) -> Session | None:
        rows = await asyncio.to_thread(self._run, "SELECT body FROM sessions WHERE id=?", (session_id,))
        return Session.model_validate_json(rows[0][0]) if rows else None

    async def list(self, tenant_id: str, offset: int, limit: int) -> tuple[builtins.list[Session], int]:
        rows = await asyncio.to_thread(
            self._run,
            "SELECT body FROM sessions WHERE tenant_id=? ORDER BY sort_key DESC, id DESC LIMIT ? OFFSET ?",
            (tenant_id, limit, offset),
        )
        total = await asyncio.to_thread(self._run, "SELECT COUNT(*) FROM sessions WHERE tenant_id=?", (tenant_id,))
        return [Session.model_validate_json(r[0]) for r in rows], int(total[0][0])

    async def delete(self, sessions: builtins.list[Session]) -> None:
        for session in sessions:
            await asyncio.to_thread(self._run, "DELETE FROM sessions WHERE id=?", (session.id,))

    def _patch(self, session_id: str, changes: dict[str, Any]) -> Session | None:
        with self._lock:
            rows = self._conn.execute("SELECT body FROM sessions WHERE id=?", (session_id,)).fetchall()
            if not rows:
                return None
            session = Session.model_validate_json(rows[0][0]).model_copy(update=changes)
            self._conn.execute(
                "UPDATE sessions SET sort_key=?, body=? WHERE id=?", (session.sort_key(), session.model_dump_json(), session_id)
            )
            return session

    async def patch(self, session_id: str, changes: dict[str, Any]) -> Session | None:
        return await asyncio.to_thread(self._patch, session_id, changes)

    async def aclose(self) -> None:
        with self._lock:
            self._conn.close()


class RedisSessionStore:
    """session:<id> holds the JSON record; sessions:<tenant> is a sorted set by sort_key."""

    def __init__(self, redis: Redis, *, prefix: str = "ragline") -> None:
        self.redis = redis
        self.prefix = prefix

    def _record(self, session_id: str) -> str:
        return f"{self.prefix}:session:{session_id}"

    def _index(self, tenant_id: str) -> str:
        return f"{self.prefix}:sessions:{tenant_id}"

    async def save(self, session: Session) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(self._record(session.id), session.model_dump_json())
            pipe.zadd(self._index(session.tenant_id), {session.id: session.sort_key()})
            await pipe.execute()

    async def get(self, session_id: str) -> Session | None:
        raw = await self.redis.get(self._record(session_id))
        return Session.model_validate_json(raw) if raw else None

    async def list(self, tenant_id: str, offset: int, limit: int) -> tuple[builtins.list[Session], int]:
        index = self._index(tenant_id)
        ids = await self.redis.zrevrange(index, offset, offset + limit - 1)
        total = await self.redis.zcard(index)
        if not ids:
            return [], int(total)
        raws = await self.redis.mget([self._record(i.decode() if isinstance(i, bytes) else str(i)) for i in ids])
        return [Session.model_validate_json(raw) for raw in raws if raw], int(total)

    async def delete(self, sessions: builtins.list[Session]) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            for session in sessions:
                pipe.delete(self._record(session.id))
                pipe.zrem(self._index(session.tenant_id), session.id)
            await pipe.execute()

    async def patch(self, session_id: str, changes: dict[str, Any]) -> Session | None:
        key = self._record(session_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            while True:  # optimistic: retried when another writer changed the record meanwhile
                try:
                    await pipe.watch(key)
                    raw = await pipe.get(key)
                    if not raw:
                        await pipe.reset()
                        return None
                    session = Session.model_validate_json(raw).model_copy(update=changes)
                    pipe.multi()
                    pipe.set(key, session.model_dump_json())
                    pipe.zadd(self._index(session.tenant_id), {session.id: session.sort_key()})
                    await pipe.execute()
                    return session
                except WatchError:
                    continue

    async def aclose(self) -> None:
        return None
