"""How every part of the service talks to the shared Redis: bounded waits, retries only for a
dropped connection, and how to tell a Redis fault (full, away) from a bug in an exception.

A command that times out is not retried. It has already waited the whole socket timeout; redis-py's
default retries (three, for timeouts too) held a request four times as long against a paused or
stopped Redis (40 s for one keyed request) and could repeat a write that had landed. A connection
that drops (Redis restarting) is replaced and the command retried with a short backoff.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from ragline import defaults

MAX_CONNECTIONS = 256  # per process and pool; commands queue for a connection beyond it, at most the socket timeout


def _retry() -> redis.retry.Retry:
    return redis.retry.Retry(ExponentialBackoff(cap=1.0, base=0.05), defaults.REDIS_RETRIES, supported_errors=(RedisConnectionError,))


def sync_client(url: str) -> redis.Redis:
    """A blocking client (raw bytes), for code that runs in worker threads."""
    return redis.Redis.from_url(url, socket_timeout=defaults.REDIS_SOCKET_TIMEOUT_S,
                                socket_connect_timeout=defaults.REDIS_CONNECT_TIMEOUT_S, retry=_retry())


def async_pool(url: str, *, decode_responses: bool = False) -> Any:
    """The connection pool of every asyncio client. Blocking: under a burst of concurrent runs a
    command waits for a connection instead of failing, but no longer than the socket timeout."""
    from redis.asyncio import BlockingConnectionPool
    from redis.asyncio.retry import Retry

    return BlockingConnectionPool.from_url(
        url, max_connections=MAX_CONNECTIONS, timeout=defaults.REDIS_SOCKET_TIMEOUT_S, decode_responses=decode_responses,
        health_check_interval=30, socket_timeout=defaults.REDIS_SOCKET_TIMEOUT_S,
        socket_connect_timeout=defaults.REDIS_CONNECT_TIMEOUT_S,
        retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), defaults.REDIS_RETRIES, supported_errors=(RedisConnectionError,)),
        retry_on_timeout=False,
    )


def _in_chain(exc: BaseException | None, found: Callable[[BaseException], bool]) -> bool:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if found(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def out_of_memory(exc: BaseException | None) -> bool:
    """Whether Redis refused a write at maxmemory, anywhere in the exception's chain (wrapped by a
    store's own error, or inside a Lua script's)."""
    return _in_chain(exc, lambda e: isinstance(e, redis.exceptions.OutOfMemoryError) or "OOM command not allowed" in str(e))


def unreachable(exc: BaseException | None) -> bool:
    """Whether Redis did not answer (a dropped connection, a timeout), anywhere in the exception's
    chain: the store is away, the request was fine."""
    return _in_chain(exc, lambda e: isinstance(e, redis.exceptions.ConnectionError | redis.exceptions.TimeoutError))
