"""StreamManager: append-only, read from an offset, blocking wait — in process and on Redis Streams
(the `streams` fixture runs each test on both; what only the Redis log does: test_redis_streams.py)."""

from __future__ import annotations

import asyncio

from ragline.checkpoints.streams import MemoryStreamManager


def ev(n: int) -> dict:
    return {"response_type": "answer", "content": f"t{n}"}


async def test_read_returns_the_events_after_an_offset_in_order(streams):
    ids = [await streams.append("s", "m", ev(n)) for n in range(5)]
    assert [e.event["content"] for e in await streams.read("s", "m")] == ["t0", "t1", "t2", "t3", "t4"]
    assert [e.id for e in await streams.read("s", "m", ids[1])] == ids[2:]
    assert await streams.read("s", "m", ids[-1]) == []
    assert all(streams.valid_id(i) for i in ids)


async def test_logs_are_keyed_by_session_and_message(streams):
    await streams.append("s", "m1", ev(1))
    await streams.append("s2", "m1", ev(2))
    assert [e.event["content"] for e in await streams.read("s", "m1")] == ["t1"]
    assert await streams.read("s", "other") == []


async def test_a_waiting_reader_wakes_on_append(streams):
    first = await streams.append("s", "m", ev(0))
    waiter = asyncio.create_task(streams.wait("s", "m", first, timeout=30))
    await asyncio.sleep(0.05)
    assert not waiter.done()
    await streams.append("s", "m", ev(1))
    entries = await waiter
    assert [e.event["content"] for e in entries] == ["t1"]


async def test_wait_returns_nothing_when_the_timeout_passes(streams):
    first = await streams.append("s", "m", ev(0))
    assert await streams.wait("s", "m", first, timeout=0.05) == []


async def test_wait_returns_at_once_when_events_are_already_there(streams):
    await streams.append("s", "m", ev(0))
    assert len(await streams.wait("s", "m", None, timeout=30)) == 1


async def test_garbage_ids_are_not_valid(streams):
    assert not streams.valid_id("abc")
    assert not streams.valid_id("")


async def test_memory_logs_expire_after_the_ttl():
    streams = MemoryStreamManager(ttl_s=0)
    await streams.append("s", "old", ev(0))
    streams._last_sweep -= 120  # the sweep runs at most once a minute
    await streams.append("s", "new", ev(1))
    assert await streams.read("s", "old") == []
    assert len(await streams.read("s", "new")) == 1


async def test_many_followers_each_get_their_whole_stream_in_order(streams):
    async def follow(message: str) -> list[str]:
        got, after = [], None
        while len(got) < 20:
            entries = await streams.wait("s", message, after, timeout=10)
            got += [e.event["content"] for e in entries]
            after = entries[-1].id if entries else after
        return got

    async def produce(message: str) -> None:
        for n in range(20):
            await streams.append("s", message, ev(n))
            if n % 5 == 0:
                await asyncio.sleep(0.01)

    messages = [f"m{i}" for i in range(30)]
    followers = [asyncio.create_task(follow(m)) for m in messages]
    await asyncio.gather(*(produce(m) for m in messages))
    results = await asyncio.gather(*followers)
    assert all(r == [f"t{n}" for n in range(20)] for r in results)
