"""The run registry: which answers are being generated, who holds them, who asked them to stop.

A run is registered when a request starts it and removed when it completes. While it runs:
- one run per session at a time (two turns on one thread would interleave their messages);
- a lease names the replica running it, renewed by a heartbeat; a run whose lease expired is
  an orphan that any replica may take over (Redis only; in process a run dies with its process);
- a stop flag, set by the stop route on any replica and read by the holder's stop watcher.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import Protocol

from redis.asyncio import Redis

from ragline import defaults
from ragline.checkpoints.streams import Fence
from ragline.contracts.state import TurnIds


@dataclass(frozen=True)
class RunRecord:
    session_id: str
    request_id: str
    user_message_id: str
    assistant_message_id: str
    tenant_id: str
    owner_id: str
    request_json: str  # the PipelineRequest, to start the turn again if no checkpoint was written
    query: str
    title_pending: bool = False
    started_at: float = 0.0
    assistant_id: str = ""  # the assistant the turn runs with (service/assistants.py), "" for none
    assistant_version: int = 0
    agent_json: str = ""  # that version's configuration: the run's agent, on a takeover too
    graph: str = "pipeline"  # the graph the turn runs, and a takeover resumes: "pipeline" or "agent" (an agent-mode assistant)
    agent_tools: tuple[str, ...] = ()  # agent mode: the tools the assistant allows (RunContext.agent_tools)
    approval_tools: tuple[str, ...] = ()  # agent mode: the tools whose calls wait for the user's approval
    agent_mcp_servers: tuple[str, ...] = ()  # agent mode: the MCP servers whose tools the agent may call
    groups: tuple[str, ...] = ()  # the asker's groups (with owner_id: what restricted documents the turn may read)
    key_knowledge_bases: tuple[str, ...] | None = None  # the asker's key was limited to these bases

    @property
    def message_id(self) -> str:
        return self.assistant_message_id

    @property
    def turn(self) -> TurnIds:
        """The ids a run's events carry (the record's first four fields)."""
        return TurnIds(self.session_id, self.request_id, self.user_message_id, self.assistant_message_id)


class RunRegistry(Protocol):
    durable: bool  # runs outlive the process (leases, takeover)

    async def begin(self, record: RunRecord, holder: str, ttl_s: float) -> RunRecord | None:
        """Register and lease the run; returns the session's running run instead when it has one."""
        ...

    async def get(self, message_id: str) -> RunRecord | None: ...

    async def running_in(self, session_id: str) -> RunRecord | None: ...

    async def finish(self, record: RunRecord) -> None: ...

    async def request_stop(self, record: RunRecord) -> None: ...

    async def stop_requested(self, message_ids: list[str]) -> set[str]: ...

    async def inject(self, message_id: str, text: str) -> None:
        """Leave a message for the run (agent mode reads it at its next step), whichever replica holds it."""
        ...

    async def take_injected(self, message_id: str) -> list[str]:
        """The messages left for the run since it last looked, oldest first; each is taken once."""
        ...

    async def await_approval(self, message_id: str, call_ids: list[str]) -> None:
        """The run waits for a decision on these tool calls; decisions already made stay (a takeover waits again)."""
        ...

    async def decide(self, message_id: str, call_id: str, decision: Decision) -> bool:
        """Decide a waiting call, from any replica; False when no such call waits (unknown, or decided already)."""
        ...

    async def decisions(self, message_id: str) -> dict[str, Decision | None]:
        """The calls the run waits on: their decision, or None while there is none."""
        ...

    async def acquire(self, message_id: str, holder: str, ttl_s: float) -> bool: ...

    async def renew(self, message_id: str, holder: str, ttl_s: float) -> bool: ...

    async def release(self, message_id: str, holder: str) -> None: ...

    def fence(self, message_id: str, holder: str, ttl_s: float) -> Fence | None:
        """What the run's appends to its log check (checkpoints/streams.py: Fence); None when one process holds every run."""
        ...

    async def orphans(self) -> list[RunRecord]: ...


@dataclass(frozen=True)
class Decision:
    """The user's decision on a tool call that waited for approval."""

    approved: bool
    reason: str = ""

    def as_json(self) -> str:
        return json.dumps({"approved": self.approved, "reason": self.reason})

    @classmethod
    def from_json(cls, raw: str) -> Decision:
        fields = json.loads(raw)
        return cls(bool(fields["approved"]), str(fields.get("reason") or ""))


class MemoryRunRegistry:
    durable = False

    def __init__(self) -> None:
        self._runs: dict[str, RunRecord] = {}
        self._by_session: dict[str, str] = {}
        self._stops: set[str] = set()
        self._inboxes: dict[str, list[str]] = {}
        self._approvals: dict[str, dict[str, Decision | None]] = {}

    async def begin(self, record: RunRecord, holder: str, ttl_s: float) -> RunRecord | None:
        running = self._by_session.get(record.session_id)
        if running is not None:
            return self._runs[running]
        self._runs[record.message_id] = record
        self._by_session[record.session_id] = record.message_id
        return None

    async def get(self, message_id: str) -> RunRecord | None:
        return self._runs.get(message_id)

    async def running_in(self, session_id: str) -> RunRecord | None:
        message_id = self._by_session.get(session_id)
        return self._runs.get(message_id) if message_id else None

    async def finish(self, record: RunRecord) -> None:
        self._runs.pop(record.message_id, None)
        if self._by_session.get(record.session_id) == record.message_id:
            del self._by_session[record.session_id]
        self._stops.discard(record.message_id)
        self._inboxes.pop(record.message_id, None)
        self._approvals.pop(record.message_id, None)

    async def await_approval(self, message_id: str, call_ids: list[str]) -> None:
        waiting = self._approvals.setdefault(message_id, {})
        for call_id in call_ids:
            waiting.setdefault(call_id, None)

    async def decide(self, message_id: str, call_id: str, decision: Decision) -> bool:
        waiting = self._approvals.get(message_id, {})
        if call_id not in waiting or waiting[call_id] is not None:
            return False
        waiting[call_id] = decision
        return True

    async def decisions(self, message_id: str) -> dict[str, Decision | None]:
        return dict(self._approvals.get(message_id, {}))

    async def inject(self, message_id: str, text: str) -> None:
        self._inboxes.setdefault(message_id, []).append(text)

    async def take_injected(self, message_id: str) -> list[str]:
        return self._inboxes.pop(message_id, [])

    async def request_stop(self, record: RunRecord) -> None:
        self._stops.add(record.message_id)

    async def stop_requested(self, message_ids: list[str]) -> set[str]:
        return self._stops.intersection(message_ids)

    async def acquire(self, message_id: str, holder: str, ttl_s: float) -> bool:
        return message_id in self._runs

    async def renew(self, message_id: str, holder: str, ttl_s: float) -> bool:
        return message_id in self._runs

    async def release(self, message_id: str, holder: str) -> None:
        return None

    def fence(self, message_id: str, holder: str, ttl_s: float) -> Fence | None:
        return None

    async def orphans(self) -> list[RunRecord]:
        return []


# compare-and-set scripts: only the holder renews or releases its lease. A holder whose beat came
# late (a starved event loop) takes its expired lease back unless another replica took the run.
# A finished run (its record deleted) is never taken back.
_RENEW = (
    "local holder = redis.call('GET', KEYS[1]) "
    "if holder == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end "
    "if not holder and redis.call('EXISTS', KEYS[2]) == 1 then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end "
    "return 0"
)
_RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end"
_FINISH = (
    "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end "
    "redis.call('SREM', KEYS[2], ARGV[1]) redis.call('DEL', KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]) return 1"
)
_WAITING = ""  # an approval hash's value for a call not decided yet
_DECIDE = "if redis.call('HGET', KEYS[1], ARGV[1]) == '' then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) return 1 end return 0"


class RedisRunRegistry:
    """Keys: run:<mid> (record), session-run:<sid> (the session's running mid), runs (set of running
    mids), lease:<mid> (holder, PX ttl), stop:<mid> (flag), inbox:<mid> (messages injected, a list),
    approval:<mid> (tool call id -> "" while it waits, then the decision as JSON)."""

    durable = True

    def __init__(self, redis: Redis, *, prefix: str = "ragline") -> None:
        self.redis = redis
        self.prefix = prefix
        self.safety_ttl_s = int(defaults.RUN_MAX_S)

    def _k(self, kind: str, ident: str = "") -> str:
        return f"{self.prefix}:{kind}:{ident}" if ident else f"{self.prefix}:{kind}"

    async def begin(self, record: RunRecord, holder: str, ttl_s: float) -> RunRecord | None:
        claimed = await self.redis.set(self._k("session-run", record.session_id), record.message_id, nx=True, ex=self.safety_ttl_s)
        if not claimed:
            running_id = await self.redis.get(self._k("session-run", record.session_id))
            running = await self.get(_text(running_id)) if running_id else None
            if running is not None:
                return running
            await self.redis.set(self._k("session-run", record.session_id), record.message_id, ex=self.safety_ttl_s)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(self._k("run", record.message_id), _dump(record), ex=self.safety_ttl_s)
            pipe.sadd(self._k("runs"), record.message_id)
            pipe.set(self._k("lease", record.message_id), holder, px=int(ttl_s * 1000))
            await pipe.execute()
        return None

    async def get(self, message_id: str) -> RunRecord | None:
        raw = await self.redis.get(self._k("run", message_id))
        return _load(raw) if raw else None

    async def running_in(self, session_id: str) -> RunRecord | None:
        message_id = await self.redis.get(self._k("session-run", session_id))
        return await self.get(_text(message_id)) if message_id else None

    async def finish(self, record: RunRecord) -> None:
        mid = record.message_id
        keys = [self._k("session-run", record.session_id), self._k("runs"), self._k("run", mid), self._k("lease", mid), self._k("stop", mid),
                self._k("inbox", mid), self._k("approval", mid)]
        await self.redis.eval(_FINISH, len(keys), *keys, mid)

    async def request_stop(self, record: RunRecord) -> None:
        await self.redis.set(self._k("stop", record.message_id), "1", ex=self.safety_ttl_s)

    async def inject(self, message_id: str, text: str) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.rpush(self._k("inbox", message_id), text)
            pipe.expire(self._k("inbox", message_id), self.safety_ttl_s)
            await pipe.execute()

    async def await_approval(self, message_id: str, call_ids: list[str]) -> None:
        key = self._k("approval", message_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            for call_id in call_ids:
                pipe.hsetnx(key, call_id, _WAITING)
            pipe.expire(key, self.safety_ttl_s)
            await pipe.execute()

    async def decide(self, message_id: str, call_id: str, decision: Decision) -> bool:
        return bool(await self.redis.eval(_DECIDE, 1, self._k("approval", message_id), call_id, decision.as_json()))

    async def decisions(self, message_id: str) -> dict[str, Decision | None]:
        stored = await self.redis.hgetall(self._k("approval", message_id))
        return {_text(call_id): (Decision.from_json(_text(raw)) if _text(raw) else None) for call_id, raw in stored.items()}

    async def take_injected(self, message_id: str) -> list[str]:
        async with self.redis.pipeline(transaction=True) as pipe:  # read and clear at once: each message is taken once
            pipe.lrange(self._k("inbox", message_id), 0, -1)
            pipe.delete(self._k("inbox", message_id))
            taken, _ = await pipe.execute()
        return [_text(item) for item in taken]

    async def stop_requested(self, message_ids: list[str]) -> set[str]:
        if not message_ids:
            return set()
        flags = await self.redis.mget([self._k("stop", mid) for mid in message_ids])
        return {mid for mid, flag in zip(message_ids, flags, strict=True) if flag}

    async def acquire(self, message_id: str, holder: str, ttl_s: float) -> bool:
        return bool(await self.redis.set(self._k("lease", message_id), holder, nx=True, px=int(ttl_s * 1000)))

    async def renew(self, message_id: str, holder: str, ttl_s: float) -> bool:
        return bool(await self.redis.eval(_RENEW, 2, self._k("lease", message_id), self._k("run", message_id), holder, int(ttl_s * 1000)))

    def fence(self, message_id: str, holder: str, ttl_s: float) -> Fence | None:
        return Fence(self._k("lease", message_id), self._k("run", message_id), holder, int(ttl_s * 1000))

    async def release(self, message_id: str, holder: str) -> None:
        await self.redis.eval(_RELEASE, 1, self._k("lease", message_id), holder)

    async def orphans(self) -> list[RunRecord]:
        running = [_text(mid) for mid in await self.redis.smembers(self._k("runs"))]
        if not running:
            return []
        leases = await self.redis.mget([self._k("lease", mid) for mid in running])
        orphans: list[RunRecord] = []
        for mid, lease in zip(running, leases, strict=True):
            if lease:
                continue
            record = await self.get(mid)
            if record is None:  # finished meanwhile, or expired by the safety timeout
                await self.redis.srem(self._k("runs"), mid)
            else:
                orphans.append(record)
        return orphans


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _dump(record: RunRecord) -> str:
    return json.dumps(asdict(record))


def _load(raw: object) -> RunRecord:
    fields = json.loads(_text(raw))  # a record stored before a field existed gets its default
    for name in ("agent_tools", "approval_tools", "agent_mcp_servers", "groups", "key_knowledge_bases"):
        if fields.get(name) is not None:
            fields[name] = tuple(fields[name])
    return RunRecord(**fields)


def now() -> float:
    return time.time()
