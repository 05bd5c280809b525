"""Fixtures: a real Redis 8 (search + JSON modules) for the session, flushed per test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from redis.asyncio import Redis

from tests.redis_server import RedisServer, fresh_redis, missing_reason


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    with RedisServer() as server:
        yield server


@pytest.fixture
async def redis(redis_server: RedisServer) -> AsyncIterator[Redis]:
    async with fresh_redis(redis_server) as client:
        yield client

