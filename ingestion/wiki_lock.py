"""Who may rebuild a knowledge base's wiki now: this process (embedded mode) or one process of all
that share Redis (issue 12: workers and replicas may each be asked to rebuild one base).

Two facts per base: a lock (`ragline:wiki:lock:<kb>`, the holder's token, expiring WIKI_BUILDING_TTL_S
after its last renewal, renewed every third of that, released by its owner only) and a request
count (`ragline:wiki:requests:<kb>`, a hash: `requested` counts rebuild requests, `done` is the
highest count a finished rebuild covered). A rebuild covers every request made before it started,
as it reads the documents after them; so a request is served once `done` reaches its number. A
process asked while another holds the lock waits until that is so, or until the lock is free
(the holder died: its lock expired), and then rebuilds itself: no request is lost. Deleting the
base deletes both; a count that went backwards tells a rebuild its base was deleted meanwhile.

A holder notices a lost lock at its next renewal, up to a third of the TTL later; until then its
rebuild goes on. So each page write and removal first checks the lock is still its own (`held`,
raising WikiLockLost otherwise): a holder that lost the lock writes nothing more once it is lost,
except in the moment between that check and the catalog's commit (staging one chunk and the commit:
a few round trips; the lock would have to expire or be taken just then). A check inside the
catalog's commit script would close that too, at the price of teaching the catalog about wiki locks.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Protocol

from ragline import defaults

if TYPE_CHECKING:
    import redis

LOCK_PREFIX = "ragline:wiki:lock:"
REQUESTS_PREFIX = "ragline:wiki:requests:"
WAIT_POLL_S = 0.5  # how often a process whose request another holder serves looks again: a rebuild takes seconds

# Only the owner renews, releases or reports: a holder whose lock expired (it paused past the TTL)
# must not extend or free the lock of the process that took over.
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('EXPIRE', KEYS[1], ARGV[2]) end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
_FINISH = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if tonumber(redis.call('HGET', KEYS[2], 'done') or '0') < tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[2], 'done', ARGV[2])
end
return 1
"""


class WikiLockLost(RuntimeError):
    """A rebuild's lock expired or was taken over (or its base deleted): it must write no more pages."""


class WikiLocks(Protocol):
    """The rebuild lock and request count of each knowledge base."""

    poll_s: float

    def request(self, kb_id: str) -> int:
        """Count a rebuild request; its number is served once `progress` shows it done."""
        ...

    def progress(self, kb_id: str) -> tuple[int, int]:
        """(requested, done): requests made, and the highest request a finished rebuild covered."""
        ...

    def acquire(self, kb_id: str) -> str | None:
        """The owner token, or None while another holds the lock."""
        ...

    async def hold(self, kb_id: str, token: str) -> None:
        """Renew the lock until cancelled; return once it is lost (expired, or the base deleted)."""
        ...

    def held(self, kb_id: str, token: str) -> bool:
        """Whether `token` still holds the lock: checked right before each page write."""
        ...

    def finish(self, kb_id: str, token: str, covered: int) -> bool:
        """Record a finished rebuild that covered requests up to `covered`; False when the lock was lost."""
        ...

    def release(self, kb_id: str, token: str) -> None: ...

    def forget(self, kb_id: str) -> None:
        """The base was deleted: drop its lock and count."""
        ...


class LocalWikiLocks:
    """One process owns the data directory: the scheduler's one task per base already serializes."""

    poll_s = WAIT_POLL_S

    def __init__(self) -> None:
        self._requested: dict[str, int] = {}
        self._done: dict[str, int] = {}
        self._held: dict[str, str] = {}

    def request(self, kb_id: str) -> int:
        self._requested[kb_id] = self._requested.get(kb_id, 0) + 1
        return self._requested[kb_id]

    def progress(self, kb_id: str) -> tuple[int, int]:
        return self._requested.get(kb_id, 0), self._done.get(kb_id, 0)

    def acquire(self, kb_id: str) -> str | None:
        if kb_id in self._held:
            return None
        self._held[kb_id] = uuid.uuid4().hex
        return self._held[kb_id]

    async def hold(self, kb_id: str, token: str) -> None:
        await asyncio.Event().wait()  # nothing expires in one process

    def held(self, kb_id: str, token: str) -> bool:
        return self._held.get(kb_id) == token

    def finish(self, kb_id: str, token: str, covered: int) -> bool:
        if self._held.get(kb_id) != token:
            return False
        self._done[kb_id] = max(self._done.get(kb_id, 0), covered)
        return True

    def release(self, kb_id: str, token: str) -> None:
        if self._held.get(kb_id) == token:
            del self._held[kb_id]

    def forget(self, kb_id: str) -> None:
        for facts in (self._requested, self._done, self._held):
            facts.pop(kb_id, None)


class RedisWikiLocks:
    """The lock and count in the shared Redis (sync client, small calls: the scheduler makes them in a thread)."""

    def __init__(self, client: redis.Redis, ttl_s: int = defaults.WIKI_BUILDING_TTL_S, poll_s: float = WAIT_POLL_S) -> None:
        self.client = client
        self.ttl_s = ttl_s
        self.poll_s = poll_s
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)
        self._finish = client.register_script(_FINISH)

    def request(self, kb_id: str) -> int:
        return int(self.client.hincrby(f"{REQUESTS_PREFIX}{kb_id}", "requested", 1))

    def progress(self, kb_id: str) -> tuple[int, int]:
        requested, done = self.client.hmget(f"{REQUESTS_PREFIX}{kb_id}", ["requested", "done"])
        return int(requested or 0), int(done or 0)

    def acquire(self, kb_id: str) -> str | None:
        token = uuid.uuid4().hex
        return token if self.client.set(f"{LOCK_PREFIX}{kb_id}", token, nx=True, ex=self.ttl_s) else None

    async def hold(self, kb_id: str, token: str) -> None:
        while True:
            await asyncio.sleep(self.ttl_s / 3)
            if not int(await asyncio.to_thread(self._renew, keys=[f"{LOCK_PREFIX}{kb_id}"], args=[token, self.ttl_s])):
                return

    def held(self, kb_id: str, token: str) -> bool:
        owner = self.client.get(f"{LOCK_PREFIX}{kb_id}")
        return (owner.decode() if isinstance(owner, bytes) else owner) == token

    def finish(self, kb_id: str, token: str, covered: int) -> bool:
        return bool(int(self._finish(keys=[f"{LOCK_PREFIX}{kb_id}", f"{REQUESTS_PREFIX}{kb_id}"], args=[token, covered])))

    def release(self, kb_id: str, token: str) -> None:
        self._release(keys=[f"{LOCK_PREFIX}{kb_id}"], args=[token])

    def forget(self, kb_id: str) -> None:
        self.client.delete(f"{LOCK_PREFIX}{kb_id}", f"{REQUESTS_PREFIX}{kb_id}")
