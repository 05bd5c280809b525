"""The stores of MCP OAuth's tokens and pending authorizations: in memory, SQLite and Redis (a real
redis-server) keep a value, let a pending one be taken only once, and forget one past its time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from ragline.mcp_client.credentials import CredentialStore, MemoryCredentialStore, RedisCredentialStore, SqliteCredentialStore


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def store(request, tmp_path) -> AsyncIterator[CredentialStore]:
    if request.param == "memory":
        yield MemoryCredentialStore()
    elif request.param == "sqlite":
        yield SqliteCredentialStore(tmp_path / "service" / "mcp_oauth.sqlite")
    else:
        from tests.redis_server import fresh_redis

        async with fresh_redis(request.getfixturevalue("redis_server")) as redis:
            yield RedisCredentialStore(redis)


async def test_a_value_is_kept_replaced_and_deleted(store):
    assert await store.get("tokens:crm:acme:alice") is None
    await store.put("tokens:crm:acme:alice", '{"access_token": "a"}')
    await store.put("tokens:crm:acme:alice", '{"access_token": "b"}')
    assert await store.get("tokens:crm:acme:alice") == '{"access_token": "b"}'
    await store.delete("tokens:crm:acme:alice")
    assert await store.get("tokens:crm:acme:alice") is None


async def test_a_pending_authorization_is_taken_once(store):
    await store.put("pending:s1", "{}", ttl_s=60)
    taken = await asyncio.gather(store.take("pending:s1"), store.take("pending:s1"))
    assert taken.count("{}") == 1 and taken.count(None) == 1


async def test_a_value_past_its_time_is_gone(store):
    await store.put("pending:s2", "{}", ttl_s=0.2)
    assert await store.get("pending:s2") == "{}"
    await asyncio.sleep(0.4)
    assert await store.get("pending:s2") is None and await store.take("pending:s2") is None


def test_the_sqlite_store_keeps_values_across_a_restart(tmp_path):
    async def write_then_read() -> str | None:
        await SqliteCredentialStore(tmp_path / "c.sqlite").put("tokens:crm:acme:alice", "kept")
        return await SqliteCredentialStore(tmp_path / "c.sqlite").get("tokens:crm:acme:alice")

    assert asyncio.run(write_then_read()) == "kept"
