"""Where wiki rebuild status lives: in this process (embedded mode) or in the shared Redis.

In shared mode a rebuild runs where its documents were ingested (usually a `ragline worker`) while
`GET .../wiki` is answered by any replica, so both facts the status shows are kept in Redis: the
last rebuild's report (`ragline:wiki:last:<kb>`, JSON) and which processes are rebuilding now
(`ragline:wiki:building:<kb>`, a sorted set of holder tokens scored by a deadline in Redis server
time). A holder renews its deadline every third of WIKI_BUILDING_TTL_S; one that died stops
counting when its deadline passes, so a base never shows "building" forever. Deleting the base
deletes both (`forget`). Which process may rebuild a base now is decided beside them (wiki_lock.py).
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from datetime import datetime
from typing import TYPE_CHECKING, Literal, Protocol

from pydantic import BaseModel, Field

from ragline import defaults
from ragline.ingestion.wiki_lock import LocalWikiLocks, RedisWikiLocks, WikiLocks

if TYPE_CHECKING:
    import redis

WikiState = Literal["idle", "building", "ok", "failed"]
LAST_PREFIX = "ragline:wiki:last:"
BUILDING_PREFIX = "ragline:wiki:building:"

# Server time on both sides: replicas' clocks never have to agree.
_MARK = """
local now = tonumber(redis.call('TIME')[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
"""
_LIVE = """
return redis.call('ZCOUNT', KEYS[1], '(' .. redis.call('TIME')[1], '+inf')
"""


class WikiStatus(BaseModel):
    """The wiki of one knowledge base: its last rebuild (by any process sharing the status)."""

    knowledge_base_id: str
    enabled: bool
    state: WikiState = Field("idle", description="idle: not built since the status was kept; building: a rebuild runs now; ok / failed: the last rebuild.")
    pages: int = Field(0, description="Wiki pages stored now.")
    written: list[str] = Field(default_factory=list, description="Pages the last rebuild wrote.")
    unchanged: int = 0
    removed: int = 0
    failed: dict[str, str] = Field(default_factory=dict, description="Page title -> why it was not written.")
    error: str = Field("", description="Why the last rebuild stopped, when it did.")
    finished_at: datetime | None = None


class WikiStatuses(Protocol):
    """Last reports and running rebuilds per knowledge base. `start` marks a base at once (a status
    read right after a change sees it building); `keep` renews the mark until it is cancelled.
    `blocking`: the calls wait on the network (Redis), so async code makes them in a thread (with
    this one's locks too); in one process they only touch dicts and run where they are called."""

    blocking: bool

    def last(self, kb_id: str) -> WikiStatus | None: ...

    def record(self, status: WikiStatus) -> None: ...

    def building(self, kb_id: str) -> bool: ...

    def start(self, kb_id: str) -> str: ...

    async def keep(self, kb_id: str, token: str) -> None: ...

    def stop(self, kb_id: str, token: str) -> None: ...

    def forget(self, kb_id: str) -> None: ...

    def locks(self) -> WikiLocks:
        """The rebuild locks that live where the status does (one process, or the shared Redis)."""
        ...


class LocalWikiStatuses:
    """This process's rebuilds only (embedded mode: one process owns the data directory)."""

    blocking = False

    def __init__(self) -> None:
        self._reports: dict[str, WikiStatus] = {}
        self._running: Counter[str] = Counter()

    def last(self, kb_id: str) -> WikiStatus | None:
        return self._reports.get(kb_id)

    def record(self, status: WikiStatus) -> None:
        self._reports[status.knowledge_base_id] = status

    def building(self, kb_id: str) -> bool:
        return self._running[kb_id] > 0

    def start(self, kb_id: str) -> str:
        self._running[kb_id] += 1
        return kb_id

    async def keep(self, kb_id: str, token: str) -> None:
        return None  # nothing expires in one process

    def stop(self, kb_id: str, token: str) -> None:
        self._running[kb_id] -= 1
        if self._running[kb_id] <= 0:
            del self._running[kb_id]

    def forget(self, kb_id: str) -> None:
        self._reports.pop(kb_id, None)

    def locks(self) -> WikiLocks:
        return LocalWikiLocks()


class RedisWikiStatuses:
    """Status shared by every replica and worker through Redis (sync client, small calls)."""

    blocking = True

    def __init__(self, client: redis.Redis, ttl_s: int = defaults.WIKI_BUILDING_TTL_S) -> None:
        self.client = client
        self.ttl_s = ttl_s
        self._mark = client.register_script(_MARK)
        self._live = client.register_script(_LIVE)

    def last(self, kb_id: str) -> WikiStatus | None:
        raw = self.client.get(f"{LAST_PREFIX}{kb_id}")
        return WikiStatus.model_validate_json(raw) if isinstance(raw, (bytes, str)) else None

    def record(self, status: WikiStatus) -> None:
        self.client.set(f"{LAST_PREFIX}{status.knowledge_base_id}", status.model_dump_json())

    def building(self, kb_id: str) -> bool:
        return int(self._live(keys=[f"{BUILDING_PREFIX}{kb_id}"])) > 0

    def start(self, kb_id: str) -> str:
        token = uuid.uuid4().hex
        self._mark(keys=[f"{BUILDING_PREFIX}{kb_id}"], args=[token, self.ttl_s])
        return token

    async def keep(self, kb_id: str, token: str) -> None:
        while True:
            await asyncio.sleep(self.ttl_s / 3)
            await asyncio.to_thread(self._mark, keys=[f"{BUILDING_PREFIX}{kb_id}"], args=[token, self.ttl_s])

    def stop(self, kb_id: str, token: str) -> None:
        self.client.zrem(f"{BUILDING_PREFIX}{kb_id}", token)

    def forget(self, kb_id: str) -> None:
        self.client.delete(f"{LAST_PREFIX}{kb_id}", f"{BUILDING_PREFIX}{kb_id}")

    def locks(self) -> WikiLocks:
        return RedisWikiLocks(self.client, self.ttl_s)


def open_wiki_statuses(client: redis.Redis | None) -> WikiStatuses:
    """Redis when the deployment shares one, else this process."""
    return RedisWikiStatuses(client) if client is not None else LocalWikiStatuses()
