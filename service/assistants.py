"""Assistants: stored, tenant-scoped, versioned configurations a turn names by id (issue 28).

An assistant is the seed's agent configuration kept on the server: every `AgentConfig` setting
(prompts, models, knowledge bases, strategies, thresholds), which of them a turn may still set
itself, the tools agent mode may use, a name and a mode. A team sets one up once and points
clients at its id. Each update writes a new version and keeps the earlier ones readable, so a
turn can record exactly the configuration it ran with.

Three stores behind one protocol, as for sessions: in memory, SQLite (embedded) and Redis (shared
by replicas). Every read and write names the tenant: another tenant's assistant is not found.
"""

from __future__ import annotations

import asyncio
import builtins
import sqlite3
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Literal, Protocol

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator
from redis.asyncio import Redis
from redis.exceptions import WatchError

from ragline.contracts.request import AgentConfig
from ragline.mcp_client.names import SEPARATOR
from ragline.nodes.tools import DEFAULT_TOOLS, TOOLS
from ragline.settings import McpServerName

AssistantMode = Literal["pipeline", "agent"]
# The tools agent mode offers (nodes/tools/); an assistant names the ones it may use.
# read_chunks is the tool's name (nodes/tools/read_chunks.py); assistants stored before it had one
# name it read_document, and load with it renamed.
KNOWN_TOOLS = tuple(TOOLS)
TOOL_RENAMES = {"read_document": "read_chunks"}
# The request settings an assistant configures, and a turn may be allowed to set itself.
SETTINGS: tuple[str, ...] = tuple(AgentConfig.model_fields)


def utcnow() -> datetime:
    return datetime.now(UTC)


def _names(kind: str, known: tuple[str, ...]) -> Callable[[builtins.list[str]], builtins.list[str]]:
    def check(names: builtins.list[str]) -> builtins.list[str]:
        unknown = [name for name in names if name not in known]
        if unknown:
            raise ValueError(f"{', '.join(map(repr, unknown))} {'is' if len(unknown) == 1 else 'are'} not {kind}; known: {', '.join(known)}")
        return list(dict.fromkeys(names))

    return check


def _renamed_tools(names: object) -> object:
    return [TOOL_RENAMES.get(name, name) if isinstance(name, str) else name for name in names] if isinstance(names, list) else names


Name = Annotated[str, Field(min_length=1, max_length=200, description="What people call the assistant.")]
Description = Annotated[str, Field(max_length=2000)]
Overridable = Annotated[builtins.list[str], Field(max_length=len(SETTINGS)), AfterValidator(_names("a request setting", SETTINGS)),
                        Field(description="Request settings a turn may set itself; any other a turn sets is refused.")]
MAX_MCP_SERVERS = 8  # an assistant's MCP servers: each one's tools cost prompt tokens every round


def _unique(names: builtins.list[str]) -> builtins.list[str]:
    return list(dict.fromkeys(names))


Tools = Annotated[builtins.list[str], BeforeValidator(_renamed_tools), Field(max_length=len(KNOWN_TOOLS)),
                  AfterValidator(_names("a known tool", KNOWN_TOOLS)), Field(description="Tools agent mode may use.")]
McpServers = Annotated[builtins.list[McpServerName], Field(max_length=MAX_MCP_SERVERS), AfterValidator(_unique),
                       Field(description="MCP servers (of the operator's agent_mcp_servers) whose tools agent mode may call, as <server>__<tool>.")]
ApprovalTools = Annotated[
    builtins.list[Annotated[str, Field(max_length=100)]], BeforeValidator(_renamed_tools), Field(max_length=len(KNOWN_TOOLS) + 4 * MAX_MCP_SERVERS),
    AfterValidator(_unique), Field(description="Tools whose calls wait for the user's approval (tool_approval_required) before they run: "
                                               "a tool, an MCP server (each of its tools) or one MCP tool (<server>__<tool>)."),
]


def approval_within_tools(tools: builtins.list[str], approval_tools: builtins.list[str], mcp_servers: builtins.list[str]) -> None:
    """A tool needing approval must be one the assistant offers (DEFAULT_TOOLS when it names none),
    or an MCP server it names, or one tool of such a server."""
    offered = tools or DEFAULT_TOOLS
    for name in approval_tools:
        server = name.partition(SEPARATOR)[0]
        if name in KNOWN_TOOLS and name not in offered:
            raise ValueError(f"approval_tools names {name!r}, which the assistant's tools do not include"
                             + ("" if tools else f" (naming no tools, it is offered {', '.join(DEFAULT_TOOLS)})"))
        if name not in KNOWN_TOOLS and server not in mcp_servers:
            raise ValueError(f"approval_tools names {name!r}, which is neither a known tool ({', '.join(KNOWN_TOOLS)}) "
                             "nor one of the assistant's mcp_servers (or <server>__<tool> of one)")


class Assistant(BaseModel):
    """One version of an assistant."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(default_factory=lambda: str(uuid.uuid4()))
    tenant_id: str
    name: Name
    description: Description = ""
    mode: AssistantMode = Field("pipeline", description="pipeline: the seed's RAG graph; agent: a tool-calling loop (graph/agent.py).")
    config: AgentConfig = Field(default_factory=AgentConfig, description="Defaults of every request setting for the turns that name it.")
    overridable: Overridable = Field(default_factory=lambda: list(SETTINGS))
    tools: Tools = Field(default_factory=list)
    approval_tools: ApprovalTools = Field(default_factory=list)
    mcp_servers: McpServers = Field(default_factory=list)
    version: int = Field(1, ge=1, description="1 when created; each update adds one, and every version stays readable.")
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)

    @model_validator(mode="after")
    def _approval_within_tools(self) -> Assistant:
        approval_within_tools(self.tools, self.approval_tools, self.mcp_servers)
        return self

    def agent_tools(self) -> dict[str, tuple[str, ...]]:
        """What a run's context (RunContext, RunRecord) holds of an agent-mode assistant's tools; {} in pipeline mode."""
        if self.mode != "agent":
            return {}
        return {"agent_tools": tuple(self.tools), "approval_tools": tuple(self.approval_tools), "agent_mcp_servers": tuple(self.mcp_servers)}

    def sort_key(self) -> float:
        """The most recently changed first (a Redis sorted-set score)."""
        return self.updated_at.timestamp() * 1000


Revise = Callable[[Assistant], Assistant]


def next_version(latest: Assistant, revise: Revise) -> Assistant:
    """What `revise` makes of the latest version, as the next one: same id, tenant and creation time."""
    revised = Assistant.model_validate(revise(latest).model_dump())  # validated again: model_copy would not
    return revised.model_copy(update={"id": latest.id, "tenant_id": latest.tenant_id, "created_at": latest.created_at,
                                      "version": latest.version + 1, "updated_at": utcnow()})


class AssistantStore(Protocol):
    async def create(self, assistant: Assistant) -> None:
        """Store a new assistant as its version 1."""
        ...

    async def get(self, tenant_id: str, assistant_id: str, version: int | None = None) -> Assistant | None:
        """The latest version, or the one named; None when the tenant has no such assistant (or version)."""
        ...

    async def list(self, tenant_id: str, offset: int, limit: int) -> tuple[builtins.list[Assistant], int]:
        """The tenant's assistants (latest versions), most recently changed first, and how many it has."""
        ...

    async def update(self, tenant_id: str, assistant_id: str, revise: Revise) -> Assistant | None:
        """Write `next_version(latest, revise)` in one step (two updates never share a version number)."""
        ...

    async def delete(self, tenant_id: str, assistant_id: str) -> bool:
        """Remove the assistant with all its versions; False when the tenant has none of this id."""
        ...

    async def aclose(self) -> None: ...


def _ordered(assistants: builtins.list[Assistant]) -> builtins.list[Assistant]:
    return sorted(assistants, key=lambda a: (a.sort_key(), a.id), reverse=True)


class MemoryAssistantStore:
    def __init__(self) -> None:
        self._versions: dict[str, builtins.list[Assistant]] = {}

    def _mine(self, tenant_id: str, assistant_id: str) -> builtins.list[Assistant]:
        versions = self._versions.get(assistant_id, [])
        return versions if versions and versions[0].tenant_id == tenant_id else []

    async def create(self, assistant: Assistant) -> None:
        self._versions[assistant.id] = [assistant.model_copy()]

    async def get(self, tenant_id: str, assistant_id: str, version: int | None = None) -> Assistant | None:
        versions = self._mine(tenant_id, assistant_id)
        found = versions[-1] if versions and version is None else next((a for a in versions if a.version == version), None)
        return found.model_copy() if found else None

    async def list(self, tenant_id: str, offset: int, limit: int) -> tuple[builtins.list[Assistant], int]:
        mine = _ordered([versions[-1] for versions in self._versions.values() if versions[-1].tenant_id == tenant_id])
        return [a.model_copy() for a in mine[offset : offset + limit]], len(mine)

    async def update(self, tenant_id: str, assistant_id: str, revise: Revise) -> Assistant | None:
        versions = self._mine(tenant_id, assistant_id)
        if not versions:
            return None
        versions.append(next_version(versions[-1], revise))
        return versions[-1].model_copy()

    async def delete(self, tenant_id: str, assistant_id: str) -> bool:
        return bool(self._mine(tenant_id, assistant_id)) and self._versions.pop(assistant_id, None) is not None

    async def aclose(self) -> None:
        return None


_SCHEMA = """
CREATE TABLE IF NOT EXISTS assistants (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, version INTEGER NOT NULL, sort_key REAL NOT NULL);
CREATE INDEX IF NOT EXISTS assistants_by_tenant ON assistants (tenant_id, sort_key DESC, id DESC);
CREATE TABLE IF NOT EXISTS assistant_versions (id TEXT NOT NULL, version INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (id, version));
"""
_GET = ("SELECT v.body FROM assistants a JOIN assistant_versions v ON v.id = a.id AND v.version = COALESCE(?, a.version) "
        "WHERE a.id = ? AND a.tenant_id = ?")
_LIST = ("SELECT v.body FROM assistants a JOIN assistant_versions v ON v.id = a.id AND v.version = a.version "
         "WHERE a.tenant_id = ? ORDER BY a.sort_key DESC, a.id DESC LIMIT ? OFFSET ?")


class SqliteAssistantStore:
    """A head row per assistant (its latest version) and a row per version; calls run in a worker
    thread, and a write is one immediate transaction, so another process on the file (the CLI
    beside `ragline serve`) never writes the same version number."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=10)
        self._lock = threading.Lock()
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.executescript(_SCHEMA)

    def _read(self, sql: str, args: tuple = ()) -> builtins.list[tuple]:
        with self._lock:
            return self._conn.execute(sql, args).fetchall()

    def _write(self, step: Callable[[sqlite3.Connection], Assistant | bool | None]) -> Assistant | bool | None:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                result = step(self._conn)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
            return result

    @staticmethod
    def _put(conn: sqlite3.Connection, assistant: Assistant) -> Assistant:
        conn.execute("INSERT INTO assistant_versions VALUES (?, ?, ?)", (assistant.id, assistant.version, assistant.model_dump_json()))
        conn.execute("INSERT OR REPLACE INTO assistants VALUES (?, ?, ?, ?)",
                     (assistant.id, assistant.tenant_id, assistant.version, assistant.sort_key()))
        return assistant

    async def create(self, assistant: Assistant) -> None:
        await asyncio.to_thread(self._write, lambda conn: self._put(conn, assistant))

    async def get(self, tenant_id: str, assistant_id: str, version: int | None = None) -> Assistant | None:
        rows = await asyncio.to_thread(self._read, _GET, (version, assistant_id, tenant_id))
        return Assistant.model_validate_json(rows[0][0]) if rows else None

    async def list(self, tenant_id: str, offset: int, limit: int) -> tuple[builtins.list[Assistant], int]:
        rows = await asyncio.to_thread(self._read, _LIST, (tenant_id, limit, offset))
        total = await asyncio.to_thread(self._read, "SELECT COUNT(*) FROM assistants WHERE tenant_id = ?", (tenant_id,))
        return [Assistant.model_validate_json(r[0]) for r in rows], int(total[0][0])

    async def update(self, tenant_id: str, assistant_id: str, revise: Revise) -> Assistant | None:
        def step(conn: sqlite3.Connection) -> Assistant | None:
            rows = conn.execute(_GET, (None, assistant_id, tenant_id)).fetchall()
            return self._put(conn, next_version(Assistant.model_validate_json(rows[0][0]), revise)) if rows else None

        result = await asyncio.to_thread(self._write, step)
        return result if isinstance(result, Assistant) else None

    async def delete(self, tenant_id: str, assistant_id: str) -> bool:
        def step(conn: sqlite3.Connection) -> bool:
            if conn.execute("DELETE FROM assistants WHERE id = ? AND tenant_id = ?", (assistant_id, tenant_id)).rowcount == 0:
                return False
            conn.execute("DELETE FROM assistant_versions WHERE id = ?", (assistant_id,))
            return True

        return bool(await asyncio.to_thread(self._write, step))

    async def aclose(self) -> None:
        with self._lock:
            self._conn.close()


class RedisAssistantStore:
    """assistant:<id> holds the latest version's JSON, assistant:<id>:versions every version by
    number, assistants:<tenant> is a sorted set by sort_key."""

    def __init__(self, redis: Redis, *, prefix: str = "ragline") -> None:
        self.redis = redis
        self.prefix = prefix

    def _latest(self, assistant_id: str) -> str:
        return f"{self.prefix}:assistant:{assistant_id}"

    def _versions(self, assistant_id: str) -> str:
        return f"{self.prefix}:assistant:{assistant_id}:versions"

    def _index(self, tenant_id: str) -> str:
        return f"{self.prefix}:assistants:{tenant_id}"

    @staticmethod
    def _of(raw: str | bytes | None, tenant_id: str) -> Assistant | None:
        assistant = Assistant.model_validate_json(raw) if raw else None
        return assistant if assistant is not None and assistant.tenant_id == tenant_id else None

    def _put(self, pipe: object, assistant: Assistant) -> None:
        body = assistant.model_dump_json()
        pipe.set(self._latest(assistant.id), body)  # type: ignore[attr-defined]
        pipe.hset(self._versions(assistant.id), str(assistant.version), body)  # type: ignore[attr-defined]
        pipe.zadd(self._index(assistant.tenant_id), {assistant.id: assistant.sort_key()})  # type: ignore[attr-defined]

    async def create(self, assistant: Assistant) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            self._put(pipe, assistant)
            await pipe.execute()

    async def get(self, tenant_id: str, assistant_id: str, version: int | None = None) -> Assistant | None:
        if version is None:
            return self._of(await self.redis.get(self._latest(assistant_id)), tenant_id)
        return self._of(await self.redis.hget(self._versions(assistant_id), str(version)), tenant_id)

    async def list(self, tenant_id: str, offset: int, limit: int) -> tuple[builtins.list[Assistant], int]:
        index = self._index(tenant_id)
        ids = await self.redis.zrevrange(index, offset, offset + limit - 1)
        total = await self.redis.zcard(index)
        if not ids:
            return [], int(total)
        raws = await self.redis.mget([self._latest(i.decode() if isinstance(i, bytes) else str(i)) for i in ids])
        return [a for raw in raws if (a := self._of(raw, tenant_id)) is not None], int(total)

    async def update(self, tenant_id: str, assistant_id: str, revise: Revise) -> Assistant | None:
        key = self._latest(assistant_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            while True:  # optimistic: retried when another writer changed the assistant meanwhile
                try:
                    await pipe.watch(key)
                    latest = self._of(await pipe.get(key), tenant_id)
                    if latest is None:
                        await pipe.reset()
                        return None
                    revised = next_version(latest, revise)
                    pipe.multi()
                    self._put(pipe, revised)
                    await pipe.execute()
                    return revised
                except WatchError:
                    continue

    async def delete(self, tenant_id: str, assistant_id: str) -> bool:
        if await self.get(tenant_id, assistant_id) is None:
            return False
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(self._latest(assistant_id), self._versions(assistant_id))
            pipe.zrem(self._index(tenant_id), assistant_id)
            await pipe.execute()
        return True

    async def aclose(self) -> None:
        return None
