"""checkpoints/redis_streams.py: TTLs, batched appends, and the shared blocking XREAD with what it holds
(what every stream log does, Redis's included: test_streams.py)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragline import defaults
from ragline.checkpoints import redis_streams as streams_module
from ragline.checkpoints.redis_streams import RedisStreamManager
from ragline.checkpoints.streams import StreamEntry
from tests.redis_server import fresh_redis


def ev(n: int) -> dict:
    return {"response_type": "answer", "content": f"t{n}"}



async def test_redis_streams_expire_an_hour_after_the_last_event(redis):
    streams = RedisStreamManager(redis)
    await streams.append("s", "m", ev(0))
    ttl = await redis.ttl(streams.key("s", "m"))
    assert defaults.STREAM_TTL_S - 5 <= ttl <= defaults.STREAM_TTL_S


async def _calls(redis, command: str) -> int:
    return int((await redis.info("commandstats")).get(f"cmdstat_{command}", {}).get("calls", 0))


async def test_redis_appends_renew_the_ttl_once_per_refresh_period_not_per_event(redis, monkeypatch):
    monkeypatch.setattr(streams_module, "TTL_REFRESH_S", 1.5)
    streams = RedisStreamManager(redis)
    await redis.config_resetstat()
    for n in range(20):
        await streams.append("s", "m", ev(n))
    assert await _calls(redis, "expire") == 1  # the first append set it; an event per token does not renew it
    assert defaults.STREAM_TTL_S - 5 <= await redis.ttl(streams.key("s", "m")) <= defaults.STREAM_TTL_S
    await redis.expire(streams.key("s", "m"), 100)  # as if most of the hour had gone by...
    await asyncio.sleep(1.6)  # ...and the refresh period with it
    await streams.append("s", "m", ev(20))
    assert await _calls(redis, "expire") == 3
    assert await redis.ttl(streams.key("s", "m")) > 100


async def test_redis_appends_made_together_go_out_in_one_transaction_each_stream_in_order(redis):
    streams = RedisStreamManager(redis)
    await redis.config_resetstat()
    ids = await asyncio.gather(*(streams.append("s", f"m{n % 5}", ev(n)) for n in range(50)))
    assert await _calls(redis, "exec") <= 2  # the first append's batch, then all that gathered behind it
    assert await _calls(redis, "xadd") == 50
    assert await _calls(redis, "expire") == 5  # each new stream's TTL once, beside its first XADD
    for m in range(5):
        entries = await streams.read("s", f"m{m}")
        assert [e.event["content"] for e in entries] == [f"t{n}" for n in range(m, 50, 5)]
        assert [e.id for e in entries] == [ids[n] for n in range(m, 50, 5)]
        assert 0 < await redis.ttl(streams.key("s", f"m{m}")) <= defaults.STREAM_TTL_S
    await streams.aclose()


async def test_a_redis_append_that_fails_fails_alone_in_its_batch(redis):
    streams = RedisStreamManager(redis)
    await redis.set(streams.key("s", "broken"), "not a stream")
    ok, broken, also_ok = await asyncio.gather(streams.append("s", "a", ev(0)), streams.append("s", "broken", ev(1)),
                                               streams.append("s", "b", ev(2)), return_exceptions=True)
    assert isinstance(broken, Exception) and "WRONGTYPE" in str(broken)
    assert [e.id for e in await streams.read("s", "a")] == [ok]
    assert [e.id for e in await streams.read("s", "b")] == [also_ok]
    await streams.aclose()


async def test_a_cancelled_redis_append_leaves_the_others_of_its_batch_alone(redis):
    streams = RedisStreamManager(redis)
    first = asyncio.create_task(streams.append("s", "m", ev(0)))
    second = asyncio.create_task(streams.append("s", "m", ev(1)))
    await asyncio.sleep(0)
    first.cancel()
    async with asyncio.timeout(10):
        assert await second
    assert [e.event["content"] for e in await streams.read("s", "m")][-1] == "t1"
    await streams.aclose()


class _SlowSender(RedisStreamManager):
    async def _send_appends(self) -> None:
        await asyncio.sleep(0.2)
        await super()._send_appends()


async def test_closing_a_redis_stream_manager_sends_the_appends_already_made(redis):
    streams = _SlowSender(redis)
    appends = [asyncio.create_task(streams.append("s", "m", ev(n))) for n in range(10)]
    await asyncio.sleep(0)  # each has made its append
    await streams.aclose()
    assert len(await streams.read("s", "m")) == 10
    assert len(await asyncio.gather(*appends)) == 10


class _CountingReads(RedisStreamManager):
    def __init__(self, redis) -> None:
        super().__init__(redis)
        self.reads = 0

    async def read(self, session_id, message_id, after=None):
        self.reads += 1
        return await super().read(session_id, message_id, after)


@pytest.mark.parametrize("gather_s", [defaults.STREAM_READ_GATHER_S, 0.05])
async def test_a_redis_follower_between_frames_waits_on_the_shared_xread_without_reading_again(redis, monkeypatch, gather_s):
    """Covered by the XREAD in flight, or by the one still gathering its streams: no read of its own."""
    monkeypatch.setattr(defaults, "STREAM_READ_GATHER_S", gather_s)
    streams = _CountingReads(redis)

    async def follow() -> list[str]:
        got, after = [], None
        while len(got) < 20:
            entries = await streams.wait("s", "m", after, timeout=10)
            got += [e.event["content"] for e in entries]
            after = entries[-1].id if entries else after
        return got

    follower = asyncio.create_task(follow())
    for n in range(20):
        await streams.append("s", "m", ev(n))
        await asyncio.sleep(0.01)  # a token at a time, as a model streams them
    assert await follower == [f"t{n}" for n in range(20)]
    assert streams.reads <= 3  # the first wait reads; later ones ride the XREAD that covers them
    await streams.aclose()


async def test_the_shared_redis_reader_starts_an_xread_at_most_once_per_gather_period(redis, monkeypatch):
    monkeypatch.setattr(defaults, "STREAM_READ_GATHER_S", 0.05)
    streams = RedisStreamManager(redis)

    async def follow(message: str) -> int:
        got, after = 0, None
        while got < 30:
            entries = await streams.wait("s", message, after, timeout=10)
            got, after = got + len(entries), entries[-1].id if entries else after
        return got

    async def produce(message: str) -> None:
        for n in range(30):
            await streams.append("s", message, ev(n))
            await asyncio.sleep(0.01)

    await redis.config_resetstat()
    started = asyncio.get_running_loop().time()
    followers = [asyncio.create_task(follow(f"m{i}")) for i in range(10)]
    await asyncio.gather(*(produce(f"m{i}") for i in range(10)))
    assert await asyncio.gather(*followers) == [30] * 10
    seconds = asyncio.get_running_loop().time() - started
    xreads = await _calls(redis, "xread")
    assert xreads <= seconds / 0.05 + 3  # 300 entries, yet an XREAD per gather period at most
    await streams.aclose()


async def _blocked_now(redis) -> list[dict]:
    """Connections blocked in an XREAD at this moment (flag b); an idle pooled connection that
    did the last XREAD still shows cmd=xread, so the command alone does not say."""
    return [c for c in await redis.client_list() if "b" in c.get("flags", "") and c.get("cmd") in ("xread", "xread|")]


async def test_redis_followers_share_one_blocking_connection(redis_server):
    async with fresh_redis(redis_server) as redis:
        streams = RedisStreamManager(redis)
        waiting = [asyncio.create_task(streams.wait("s", f"m{i}", None, timeout=10)) for i in range(40)]
        blocked: list = []
        for _ in range(200):  # wait for the follower to block (a loaded machine may take a while)
            blocked = await _blocked_now(redis)
            if blocked:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)  # ...and give any second, wrongful blocker the time to show up
        assert len(await _blocked_now(redis)) == 1
        for i in range(40):
            await streams.append("s", f"m{i}", ev(i))
        assert [len(e) for e in await asyncio.gather(*waiting)] == [1] * 40
        await streams.aclose()


async def test_a_busy_redis_follower_gets_what_the_shared_xread_read_meanwhile_without_reading_it_again(redis, monkeypatch):
    """Under load the follower is still sending its last frame when the next XREAD returns: those
    entries are held for it, not dropped and read back with an XRANGE of its own."""
    monkeypatch.setattr(streams_module, "LINGER_S", 600.0)
    streams = _CountingReads(redis)
    key = streams.key("s", "m")
    first = await streams.append("s", "m", ev(0))
    waiting = asyncio.create_task(streams.wait("s", "m", first, timeout=10))
    await _until(lambda: streams._blocking.get(key) == first)
    reads = streams.reads
    second = await streams.append("s", "m", ev(1))
    assert [e.id for e in await waiting] == [second]
    later = [await streams.append("s", "m", ev(n)) for n in range(2, 6)]  # the follower is busy: nobody waits
    await _until(lambda: streams._cursor.get(key) == later[-1])
    assert [e.event["content"] for e in await streams.wait("s", "m", second, timeout=10)] == ["t2", "t3", "t4", "t5"]
    assert streams.reads == reads
    await streams.aclose()


async def test_a_redis_follower_behind_what_is_held_reads_every_entry(redis, monkeypatch):
    monkeypatch.setattr(streams_module, "LINGER_S", 600.0)
    monkeypatch.setattr(streams_module, "HELD_MAX", 3)
    streams = _CountingReads(redis)
    key = streams.key("s", "m")
    ids = [await streams.append("s", "m", ev(0))]
    waiting = asyncio.create_task(streams.wait("s", "m", ids[0], timeout=10))
    await _until(lambda: streams._blocking.get(key) == ids[0])
    ids += [await streams.append("s", "m", ev(n)) for n in range(1, 8)]
    assert await waiting
    await _until(lambda: streams._cursor.get(key) == ids[-1])
    assert len(streams._held[key].entries) <= 3  # the bound holds while nobody comes back
    assert [e.id for e in await streams.wait("s", "m", ids[0], timeout=10)] == ids[1:]  # the oldest were let go: read again
    reads = streams.reads
    assert [e.id for e in await streams.wait("s", "m", ids[5], timeout=10)] == ids[6:]  # a second reader, further on
    assert streams.reads == reads
    await streams.aclose()


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=30), held_max=st.integers(0, 5))
def test_what_is_held_is_every_entry_after_a_position_or_nothing(steps, held_max):
    """A model of a stream (ids 1..n) read by XREADs from arbitrary positions and waited on from
    arbitrary positions: `after` is either exactly the entries after the position, or None."""
    stream: list[StreamEntry] = []
    held: streams_module._Held | None = None
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(streams_module, "HELD_MAX", held_max)
        for grow, back in steps:
            stream += [StreamEntry(f"{len(stream) + i + 1}-0", {}) for i in range(grow)]
            start = max(0, len(stream) - back)  # an XREAD from there: all that followed it
            position = f"{start}-0"
            read = stream[start:]
            if read:
                held = (held or streams_module._Held(position, [])).extend(position, read)
            if held is not None:
                for waited in range(len(stream) + 1):
                    got = held.after(f"{waited}-0")
                    assert got is None or got == stream[waited:held_end(held, stream)]
                assert len(held.entries) <= held_max


def held_end(held: streams_module._Held, stream: list[StreamEntry]) -> int:
    return int((held.entries[-1].id if held.entries else held.start).split("-")[0])


class _LateReader(RedisStreamManager):
    """Replays, step by step, the race that lost frames under load (98 of 100 Redis streams intact):
    a reader's XRANGE is answered before entry 2 is appended (it sees nothing new), but handled only
    after the shared XREAD has delivered entry 2 to nobody and moved its cursor past it; entry 3
    then lands before the wake-up that reader sends."""

    def __init__(self, redis) -> None:
        super().__init__(redis)
        self.stale_reads = 0
        self.append_before_wake: dict | None = None

    async def read(self, session_id, message_id, after=None):
        if self.stale_reads:
            self.stale_reads -= 1
            return []  # the answer Redis gave before entry 2 was appended
        return await super().read(session_id, message_id, after)

    async def _wake(self) -> None:
        if self.append_before_wake is not None:
            event, self.append_before_wake = self.append_before_wake, None
            entry = await self.append("s", "m", event)
            await _until(lambda: self._cursor.get(self.key("s", "m")) == entry)  # the shared XREAD took it
        await super()._wake()


async def _until(condition) -> None:
    for _ in range(2000):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition never held")


async def test_redis_reader_behind_the_shared_cursor_still_gets_every_entry(redis, monkeypatch):
    monkeypatch.setattr(streams_module, "LINGER_S", 600.0)  # the stream stays in the shared XREAD throughout
    monkeypatch.setattr(streams_module, "HELD_MAX", 0)  # what the XREAD read is not held: the reader reads it
    streams = _LateReader(redis)
    key = streams.key("s", "m")
    first = await streams.append("s", "m", ev(1))
    waiting = asyncio.create_task(streams.wait("s", "m", first, timeout=30))
    await _until(lambda: streams._blocking.get(key) == first)
    second = await streams.append("s", "m", ev(2))
    assert [e.id for e in await waiting] == [second]
    third = await streams.append("s", "m", ev(3))  # nobody waits: the shared XREAD moves its cursor on
    await _until(lambda: streams._blocking.get(key) == third)
    streams.stale_reads, streams.append_before_wake = 1, ev(4)
    entries = await streams.wait("s", "m", second, timeout=30)  # the reader saw entry 2, not yet 3
    assert [e.event["content"] for e in entries] == ["t3", "t4"]
    await streams.aclose()


async def test_a_fenced_append_goes_in_only_while_its_writer_holds_the_lease(redis):
    from ragline.checkpoints.streams import Fence, FenceLost

    streams = RedisStreamManager(redis)
    fence = Fence("lease:m", "run:m", "A", 5_000)
    await redis.set("run:m", "{}")
    await redis.set("lease:m", "A")
    await streams.append("s", "m", ev(1), fence)
    await redis.delete("lease:m")  # expired, nobody took it, the run goes on: taken back, as a late renewal does
    await streams.append("s", "m", ev(2), fence)
    assert await redis.get("lease:m") in (b"A", "A") and 0 < await redis.pttl("lease:m") <= 5_000
    await redis.set("lease:m", "B")  # another replica took the run over
    with pytest.raises(FenceLost):
        await streams.append("s", "m", ev(3), fence)
    await redis.delete("lease:m", "run:m")  # the run ended: nothing is taken back
    with pytest.raises(FenceLost):
        await streams.append("s", "m", ev(4), fence)
    assert await redis.get("lease:m") is None
    await streams.append("s", "m", ev(5))  # unfenced appends (a stop, a title) are not held back
    assert [entry.event["content"] for entry in await streams.read("s", "m")] == ["t1", "t2", "t5"]
    await streams.aclose()
