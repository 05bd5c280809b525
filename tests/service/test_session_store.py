"""Session records in memory, SQLite and Redis: tenant lists, pinned first, paging, patches."""

from __future__ import annotations

from datetime import timedelta

import pytest

from ragline.service.sessions import (
    MemorySessionStore,
    RedisSessionStore,
    Session,
    SqliteSessionStore,
    utcnow,
)
from tests.redis_server import fresh_redis


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def store(request, tmp_path):
    if request.param == "memory":
        yield MemorySessionStore()
    elif request.param == "sqlite":
        sqlite = SqliteSessionStore(tmp_path / "sessions.sqlite")
        yield sqlite
        await sqlite.aclose()
    else:
        async with fresh_redis(request.getfixturevalue("redis_server")) as redis:
            yield RedisSessionStore(redis)


def session(tenant: str, minutes_ago: int, **fields) -> Session:
    when = utcnow() - timedelta(minutes=minutes_ago)
    return Session(tenant_id=tenant, owner_id="o", created_at=when, updated_at=when, **fields)


async def test_lists_are_per_tenant_pinned_first_then_most_recent(store):
    old, new, pinned = session("a", 30), session("a", 1), session("a", 60, pinned=True)
    for s in (old, new, pinned, session("b", 0)):
        await store.save(s)
    items, total = await store.list("a", 0, 10)
    assert [s.id for s in items] == [pinned.id, new.id, old.id]
    assert total == 3
    page, total = await store.list("a", 1, 1)
    assert [s.id for s in page] == [new.id] and total == 3


async def test_a_patch_changes_only_its_fields_and_reorders(store):
    old, new = session("a", 30), session("a", 1)
    await store.save(old)
    await store.save(new)
    patched = await store.patch(old.id, {"title": "T", "updated_at": utcnow()})
    assert patched is not None and patched.title == "T"
    items, _ = await store.list("a", 0, 10)
    assert items[0].id == old.id and items[0].title == "T"
    assert await store.patch("missing", {"title": "x"}) is None


async def test_deleted_sessions_are_gone(store):
    s = session("a", 0)
    await store.save(s)
    await store.delete([s])
    assert await store.get(s.id) is None
    assert await store.list("a", 0, 10) == ([], 0)
