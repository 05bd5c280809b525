"""StreamManager: the append-only event log of one answer (seed: internal/stream).

A run appends every event it emits to the log keyed by (session id, assistant message id); SSE
responses read it from an offset. Two operations and a blocking wait:

- `append(session, message, event) -> entry id`, and `append_soon` for a caller that cannot wait
  (done at once in process; on Redis, queued for the next batch and answered by a future). With a
  `Fence`, the append goes in only while its writer still holds the run's lease (FenceLost
  otherwise), checked in the same atomic step as the write
- `read(session, message, after=None) -> entries after that id` (all of them when None)
- `wait(session, message, after, timeout) -> entries after that id`, blocking until there are some
  or the timeout passes (readers never poll).

Entry ids increase within a log and are opaque to callers: an integer per log in process, the
Redis Streams id (`<ms>-<seq>`) in Redis. Logs expire STREAM_TTL_S after their last event (on Redis, give or take TTL_REFRESH_S).

This module holds the contract and the in-process log; the Redis log, for several replicas, is
checkpoints/redis_streams.py.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from ragline import defaults

Event = dict[str, Any]


@dataclass(frozen=True)
class StreamEntry:
    id: str
    event: Event


@dataclass(frozen=True)
class Fence:
    """An append goes in only while `lease_key` names `holder`. A lease that expired untaken, of a
    run not yet finished (`record_key` exists), is taken back for `ttl_ms`, as a late renewal does.

    Without it, a replica whose event loop stalled past its lease goes on appending while the
    replica that took the run over appends too: the client sees parts of the answer's events twice."""

    lease_key: str
    record_key: str
    holder: str
    ttl_ms: int


class FenceLost(Exception):
    """The fence's key names another holder: the writer no longer owns the log."""


class StreamManager(Protocol):
    async def append(self, session_id: str, message_id: str, event: Event, fence: Fence | None = None) -> str: ...

    def append_soon(self, session_id: str, message_id: str, event: Event, fence: Fence | None = None) -> asyncio.Future[str] | None: ...

    async def read(self, session_id: str, message_id: str, after: str | None = None) -> list[StreamEntry]: ...

    async def wait(self, session_id: str, message_id: str, after: str | None, timeout: float) -> list[StreamEntry]: ...

    def valid_id(self, entry_id: str) -> bool: ...

    async def tell(self, session_id: str, message_id: str, event: Event) -> None:
        """Show `event` to the readers waiting now, in every process, without storing it: what a
        writer says when its store refuses the write (Redis full)."""

    async def aclose(self) -> None: ...


@dataclass
class _Log:
    entries: list[StreamEntry] = field(default_factory=list)
    last_append: float = 0.0
    changed: asyncio.Event = field(default_factory=asyncio.Event)


class MemoryStreamManager:
    """One process: a list per answer and an asyncio.Event that wakes its readers on append."""

    def __init__(self, ttl_s: float = defaults.STREAM_TTL_S) -> None:
        self.ttl_s = ttl_s
        self._logs: dict[tuple[str, str], _Log] = {}
        self._last_sweep = time.monotonic()

    def valid_id(self, entry_id: str) -> bool:
        return entry_id.isdigit() and len(entry_id) < 19

    async def append(self, session_id: str, message_id: str, event: Event, fence: Fence | None = None) -> str:
        return self.append_now(session_id, message_id, event)  # one process holds every run: no fence to check

    def append_soon(self, session_id: str, message_id: str, event: Event, fence: Fence | None = None) -> None:
        """`append` for a caller that cannot wait (a stage emitting an event): here it is done at once."""
        self.append_now(session_id, message_id, event)

    def append_now(self, session_id: str, message_id: str, event: Event) -> str:
        """`append` for a caller that cannot wait (a stage emitting an event): nothing here waits."""
        now = time.monotonic()
        self._sweep(now)
        log = self._logs.setdefault((session_id, message_id), _Log())
        entry = StreamEntry(str(len(log.entries) + 1), event)
        log.entries.append(entry)
        log.last_append = now
        woken, log.changed = log.changed, asyncio.Event()
        woken.set()
        return entry.id

    async def read(self, session_id: str, message_id: str, after: str | None = None) -> list[StreamEntry]:
        log = self._logs.get((session_id, message_id))
        if log is None:
            return []
        return log.entries[int(after or 0) :]

    async def wait(self, session_id: str, message_id: str, after: str | None, timeout: float) -> list[StreamEntry]:
        log = self._logs.setdefault((session_id, message_id), _Log(last_append=time.monotonic()))
        entries = log.entries[int(after or 0) :]
        if entries:
            return entries
        changed = log.changed
        try:
            async with asyncio.timeout(timeout):  # not wait_for: on 3.11 it makes a task per wait, one per token
                await changed.wait()
        except TimeoutError:
            return []
        return log.entries[int(after or 0) :]

    async def tell(self, session_id: str, message_id: str, event: Event) -> None:
        pass  # in one process the log is memory, and the job records files: no store here refuses a write

    def _sweep(self, now: float) -> None:
        if now - self._last_sweep < 60:
            return
        self._last_sweep = now
        for key in [k for k, log in self._logs.items() if now - log.last_append > self.ttl_s]:
            del self._logs[key]

    async def aclose(self) -> None:
        self._logs.clear()
