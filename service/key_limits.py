"""Per API key: a request rate (token bucket) and a number of concurrent answer streams.

Embedded mode counts in this process (`KeyLimiter`). In shared mode every replica counts in
Redis (`RedisKeyLimiter`), so N replicas behind a load balancer grant a key its limits once, not
N times. A stream holds a lease in the key's sorted set (score: when it expires, in Redis' own
clock); the process renews its open leases, so a replica that dies frees its slots within
STREAM_LEASE_S instead of holding them for ever.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from redis.exceptions import RedisError

from ragline.redis_clients import out_of_memory

if TYPE_CHECKING:
    from ragline.services import Services

log = logging.getLogger(__name__)

STREAM_LEASE_S = 30  # a stream's slot outlives its process by at most this long
# A limit is a guard, not the request's work: when Redis does not answer within this, the request
# passes uncounted instead of waiting for the socket timeout (a paused Redis held every keyed route).
LIMIT_DEADLINE_S = 0.5
LIMIT_QUIET_S = 1.0  # after Redis failed a limit, requests pass uncounted this long before it is asked again
UNANSWERED = object()  # Redis gave no answer: the request passes uncounted
UNCOUNTED = ""  # the lease of a stream admitted while Redis was unreachable
BUCKET_SWEEP_MIN = 1024  # buckets kept before the first sweep of refilled ones


class Limiter(Protocol):
    max_streams: int

    async def retry_after(self, key: str) -> float | None:
        """Seconds until the key may send again, or None when this request may pass (and is counted)."""

    async def open_stream(self, key: str) -> str | None:
        """A lease on one of the key's stream slots, or None when all are taken."""

    async def close_stream(self, key: str, lease: str) -> None: ...

    async def aclose(self) -> None: ...

    def uncounted(self) -> dict[tuple[str, str], int]:
        """Requests let through without being counted, by limit ("rate", "streams") and reason."""


@dataclass
class _Bucket:
    tokens: float
    at: float


class KeyLimiter:
    """In this process: a token bucket per key and a count of its open answer streams."""

    def __init__(self, per_minute: int, burst: int, max_streams: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = per_minute / 60.0
        self.burst = burst
        self.max_streams = max_streams
        self.clock = clock
        self._buckets: dict[str, _Bucket] = {}
        self._streams: dict[str, set[str]] = {}
        self._sweep_at = BUCKET_SWEEP_MIN

    async def retry_after(self, key: str) -> float | None:
        if self.rate <= 0:
            return None
        now = self.clock()
        if len(self._buckets) >= self._sweep_at:
            self._forget_full_buckets(now)
        bucket = self._buckets.setdefault(key, _Bucket(float(self.burst), now))
        bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.at) * self.rate)
        bucket.at = now
        if bucket.tokens >= 1:
            bucket.tokens -= 1
            return None
        return (1 - bucket.tokens) / self.rate

    def _forget_full_buckets(self, now: float) -> None:
        """A bucket that has refilled is the same as no bucket: forgetting it keeps the memory of a
        flood of distinct (even made-up) keys to those seen within one refill time. Amortised: the
        next sweep waits until the table has doubled."""
        refill_s = self.burst / self.rate
        self._buckets = {key: b for key, b in self._buckets.items() if now - b.at < refill_s}
        self._sweep_at = max(BUCKET_SWEEP_MIN, 2 * len(self._buckets))

    async def open_stream(self, key: str) -> str | None:
        leases = self._streams.setdefault(key, set())
        if self.max_streams and len(leases) >= self.max_streams:
            return None
        lease = uuid.uuid4().hex
        leases.add(lease)
        return lease

    async def close_stream(self, key: str, lease: str) -> None:
        leases = self._streams.get(key, set())
        leases.discard(lease)
        if not leases:
            self._streams.pop(key, None)

    async def aclose(self) -> None:
        pass

    def uncounted(self) -> dict[tuple[str, str], int]:
        return {}  # counted in this process: nothing can be unreachable


# KEYS: the key's bucket. ARGV: rate per second, burst. Returns -1 (pass) or the seconds to wait, as a string.
_TAKE_TOKEN = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens, at = tonumber(state[1]) or burst, tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
local wait = -1
if tokens >= 1 then tokens = tokens - 1 else wait = (1 - tokens) / rate end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('EXPIRE', KEYS[1], math.ceil(burst / rate) + 1)
return tostring(wait)
"""

# KEYS: the key's leases. ARGV: max streams (0: no limit), lease id, lease seconds. Returns 1 (granted) or 0.
_OPEN_STREAM = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local most = tonumber(ARGV[1])
if most > 0 and redis.call('ZCARD', KEYS[1]) >= most then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]) + 1)
return 1
"""

# KEYS: the key's leases. ARGV: lease seconds, then the lease ids this process holds. Only leases still there are renewed.
_RENEW = """
local t = redis.call('TIME')
local until_ = tonumber(t[1]) + tonumber(t[2]) / 1000000 + tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', until_, ARGV[i]) end
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[1]) + 1)
return 1
"""


class RedisKeyLimiter:
    """The same limits, counted in the shared Redis for every replica at once."""

    def __init__(self, redis: Any, per_minute: int, burst: int, max_streams: int, *,
                 prefix: str = "ragline:limits", lease_s: int = STREAM_LEASE_S) -> None:
        self.redis = redis  # an asyncio client
        self.rate = per_minute / 60.0
        self.burst = burst
        self.max_streams = max_streams
        self.prefix, self.lease_s = prefix, lease_s
        self._take = redis.register_script(_TAKE_TOKEN)
        self._open = redis.register_script(_OPEN_STREAM)
        self._renew = redis.register_script(_RENEW)
        self._held: dict[str, set[str]] = {}
        self._renewer: asyncio.Task[None] | None = None
        self.deadline_s = LIMIT_DEADLINE_S
        self.clock = time.monotonic
        self._uncounted: dict[tuple[str, str], int] = {}
        self._failure: str | None = None  # why the last call failed: logged once, until Redis answers again
        self._quiet_until = 0.0  # after a failure, requests pass uncounted without asking Redis until then

    async def retry_after(self, key: str) -> float | None:
        if self.rate <= 0:
            return None
        wait = await self._ask("rate", self._take, keys=[f"{self.prefix}:rate:{key}"], args=[self.rate, self.burst])
        return None if wait is UNANSWERED or float(wait) < 0 else float(wait)

    async def open_stream(self, key: str) -> str | None:
        lease = uuid.uuid4().hex
        granted = await self._ask("streams", self._open, keys=[self._leases(key)], args=[self.max_streams, lease, self.lease_s])
        if granted is UNANSWERED:
            return UNCOUNTED
        if not granted:
            return None
        self._held.setdefault(key, set()).add(lease)
        if self._renewer is None or self._renewer.done():
            self._renewer = asyncio.create_task(self._renew_held())
        return lease

    def uncounted(self) -> dict[tuple[str, str], int]:
        return dict(self._uncounted)

    async def _ask(self, limit: str, script: Any, *, keys: list[str], args: list[Any]) -> Any:
        """The script's answer, or UNANSWERED when Redis did not give one within the deadline (the
        request passes, counted in `uncounted`). After a failure the next LIMIT_QUIET_S pass at
        once: a paused Redis costs one deadline per second, not one per request."""
        if self.clock() < self._quiet_until:
            return self._let_through(limit, self._failure or "timeout")
        try:
            async with asyncio.timeout(self.deadline_s):
                answer = await script(keys=keys, args=args)
        except (RedisError, TimeoutError) as exc:
            reason = "full" if out_of_memory(exc) else "timeout" if isinstance(exc, TimeoutError) else "unreachable"
            if self._failure is None:
                log.warning("API key limits not counted until Redis answers again (%s: %s)", reason,
                            exc or f"no answer within {self.deadline_s} s")
            self._failure, self._quiet_until = reason, self.clock() + LIMIT_QUIET_S
            return self._let_through(limit, reason)
        if self._failure is not None:
            self._failure = None
            log.warning("API key limits counted again: Redis answers")
        return answer

    def _let_through(self, limit: str, reason: str) -> object:
        self._uncounted[(limit, reason)] = self._uncounted.get((limit, reason), 0) + 1
        return UNANSWERED

    async def close_stream(self, key: str, lease: str) -> None:
        held = self._held.get(key, set())
        held.discard(lease)
        if not held:
            self._held.pop(key, None)
        if lease != UNCOUNTED:
            with contextlib.suppress(RedisError, TimeoutError):  # else the lease lapses by itself within lease_s
                async with asyncio.timeout(self.deadline_s):
                    await self.redis.zrem(self._leases(key), lease)

    async def aclose(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewer  # the client is the root's (Services.redis_async): it closes it

    def _leases(self, key: str) -> str:
        return f"{self.prefix}:streams:{key}"

    async def _renew_held(self) -> None:
        """Keep this process' leases alive while it holds any; stops when the last one closes."""
        while self._held:
            await asyncio.sleep(self.lease_s / 3)
            for key, leases in list(self._held.items()):
                if leases:
                    with contextlib.suppress(Exception):  # Redis away: the next round renews, or the lease lapses
                        await self._renew(keys=[self._leases(key)], args=[self.lease_s, *leases])


def open_limiter(services: Services) -> Limiter:
    """Counted in Redis when the deployment shares one (redis_url), else in this process."""
    settings = services.settings
    if not settings.redis_url:
        return KeyLimiter(settings.rate_limit_per_minute, settings.rate_limit_burst, settings.max_streams_per_key)
    return RedisKeyLimiter(services.redis_async("limits"), settings.rate_limit_per_minute, settings.rate_limit_burst,
                           settings.max_streams_per_key)

