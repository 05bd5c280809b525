"""Every Redis client of the service retries a dropped connection, never a command that timed out
(it already waited the whole socket timeout: retries multiplied a paused Redis' hold on a request)."""

from __future__ import annotations

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ragline import defaults
from ragline.redis_clients import async_pool, sync_client


def _attempts(retry, error: Exception) -> int:
    calls = 0

    def fail() -> None:
        nonlocal calls
        calls += 1
        raise error

    with pytest.raises(type(error)):
        retry.call_with_retry(fail, lambda _error: None)
    return calls


async def _attempts_async(retry, error: Exception) -> int:
    calls = 0

    async def fail() -> None:
        nonlocal calls
        calls += 1
        raise error

    async def nothing(_error: Exception) -> None:
        pass

    with pytest.raises(type(error)):
        await retry.call_with_retry(fail, nothing)
    return calls


def test_the_sync_client_retries_a_dropped_connection_not_a_timeout():
    retry = sync_client("redis://127.0.0.1:1").get_connection_kwargs()["retry"]
    retry._backoff.compute = lambda failures: 0  # no waits between attempts in this test
    assert _attempts(retry, RedisTimeoutError("timed out")) == 1
    assert _attempts(retry, RedisConnectionError("reset")) == 1 + defaults.REDIS_RETRIES


async def test_the_async_pool_retries_a_dropped_connection_not_a_timeout():
    pool = async_pool("redis://127.0.0.1:1")
    connection = pool.make_connection()
    retry = connection.retry
    retry._backoff.compute = lambda failures: 0
    assert await _attempts_async(retry, RedisTimeoutError("timed out")) == 1
    assert await _attempts_async(retry, RedisConnectionError("reset")) == 1 + defaults.REDIS_RETRIES
    assert pool.timeout == defaults.REDIS_SOCKET_TIMEOUT_S  # waiting for a free connection is bounded as well
