"""Each API key gets a request rate and a number of concurrent answer streams; beyond them, 429."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from redis.asyncio import Redis

from ragline.api.app import create_app
from ragline.service.key_limits import UNCOUNTED, KeyLimiter, RedisKeyLimiter
from tests.api.live import ThreadServer, memory_settings, new_session
from tests.redis_server import free_port
from tests.scripted_model import Reply

KEYS = {"key-a": "acme", "key-b": "globex"}


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_a_key_gets_its_burst_then_the_per_minute_rate():
    clock = FakeClock()
    limiter = KeyLimiter(per_minute=60, burst=3, max_streams=0, clock=clock)
    assert [await limiter.retry_after("k") for _ in range(3)] == [None, None, None]
    assert await limiter.retry_after("k") == pytest.approx(1.0)  # 60/min: one token a second
    assert await limiter.retry_after("other") is None  # keys are counted apart
    clock.now = 1.0
    assert await limiter.retry_after("k") is None
    assert await limiter.retry_after("k") is not None


async def test_a_flood_of_distinct_keys_is_forgotten_once_their_buckets_refill_and_limits_still_hold():
    from ragline.service.key_limits import BUCKET_SWEEP_MIN

    clock = FakeClock()
    limiter = KeyLimiter(per_minute=60, burst=3, max_streams=0, clock=clock)  # a bucket refills in 3 s
    for _ in range(3):
        await limiter.retry_after("busy")
    for second in range(30):
        clock.now = float(second)
        for n in range(1000):
            await limiter.retry_after(f"made-up-{second}-{n}")
        assert await limiter.retry_after("busy") is None or second == 0  # the real key keeps its rate...
    assert len(limiter._buckets) <= 2 * max(BUCKET_SWEEP_MIN, 4 * 1000)  # ...and 30,000 keys left ~4 s worth behind
    clock.now = 30.0
    assert [await limiter.retry_after("drained") for _ in range(4)][-1] is not None  # a fresh key still gets only its burst


async def test_streams_are_counted_per_key_and_released():
    limiter = KeyLimiter(per_minute=0, burst=1, max_streams=2)
    first, second = await limiter.open_stream("k"), await limiter.open_stream("k")
    assert first and second and first != second
    assert await limiter.open_stream("k") is None and await limiter.open_stream("other")
    await limiter.close_stream("k", first)
    assert await limiter.open_stream("k")


# --- shared mode: every replica counts in one Redis ---


@pytest.fixture
async def replicas(redis_server) -> AsyncIterator[tuple[RedisKeyLimiter, RedisKeyLimiter]]:
    """Two replicas' limiters on one flushed Redis: 60 requests a minute after a burst of 3, one stream per key."""
    redis_server.flush()
    pair = tuple(RedisKeyLimiter(Redis.from_url(redis_server.url, decode_responses=True), 60, 3, 1, lease_s=1) for _ in range(2))
    yield pair  # type: ignore[misc]
    for limiter in pair:
        await limiter.aclose()


async def test_replicas_share_one_bucket_per_key(replicas):
    a, b = replicas
    assert [await a.retry_after("k"), await b.retry_after("k"), await a.retry_after("k")] == [None, None, None]
    wait = await b.retry_after("k")  # the burst was spent on two replicas together
    assert wait is not None and 0.9 < wait <= 1.0
    assert await b.retry_after("other") is None


async def test_replicas_share_the_stream_slots_of_a_key_and_a_dead_replicas_slot_lapses(replicas):
    a, b = replicas
    held = await a.open_stream("k")
    assert held and await b.open_stream("k") is None  # one stream per key, whichever replica serves it
    await a.close_stream("k", held)
    kept = await b.open_stream("k")
    assert kept
    await asyncio.sleep(1.5)  # b renews its lease (every lease_s/3) while the stream runs
    assert await a.open_stream("k") is None
    await b.aclose()  # b dies without closing: its renewals stop
    await asyncio.sleep(1.2)  # past the lease: a Redis expiry, not a duration under test
    assert await a.open_stream("k")


async def test_the_limits_fail_open_while_redis_is_unreachable():
    """A limit that cannot be counted lets the request through (the route answers 503 if it needs Redis)."""
    limiter = RedisKeyLimiter(Redis.from_url(f"redis://127.0.0.1:{free_port()}", socket_connect_timeout=0.5), 60, 1, 1)
    assert await limiter.retry_after("k") is None and await limiter.retry_after("k") is None
    lease = await limiter.open_stream("k")
    assert lease is not None and await limiter.open_stream("k") is not None
    await limiter.close_stream("k", lease)
    await limiter.aclose()


async def test_a_paused_redis_costs_the_limiter_its_deadline_then_nothing_until_it_answers_again(redis_server):
    """The limiter's calls are writes (Lua): under CLIENT PAUSE WRITE they would wait the whole socket
    timeout (10 s here). The deadline lets the request through after 0.2 s, and requests in the next
    second pass without asking; both are counted as uncounted, and counting resumes with Redis."""
    from ragline.redis_clients import async_pool

    clock = FakeClock()
    redis = Redis(connection_pool=async_pool(redis_server.url))
    limiter = RedisKeyLimiter(redis, 60, 5, 1, prefix="paused-test")
    limiter.deadline_s, limiter.clock = 0.2, clock
    admin = Redis.from_url(redis_server.url)
    await admin.execute_command("CLIENT", "PAUSE", 60_000, "WRITE")
    try:
        # far below the socket timeout: an answer at all within 5 s means the deadline held
        assert await asyncio.wait_for(limiter.retry_after("k"), 5) is None
        assert await asyncio.wait_for(limiter.open_stream("k"), 5) == UNCOUNTED
        assert limiter.uncounted() == {("rate", "timeout"): 1, ("streams", "timeout"): 1}
        asking, limiter._take = limiter._take, None  # within the quiet second Redis is not asked at all
        assert await limiter.retry_after("k") is None
        limiter._take = asking
        clock.now += 2
        assert await asyncio.wait_for(limiter.retry_after("k"), 5) is None
        assert limiter.uncounted()[("rate", "timeout")] == 3
    finally:
        await admin.execute_command("CLIENT", "UNPAUSE")
    clock.now += 2
    assert await limiter.retry_after("k") is None
    assert limiter.uncounted()[("rate", "timeout")] == 3  # counted in Redis again
    await limiter.aclose()
    await redis.aclose()
    await admin.aclose()


async def test_a_job_event_stream_holds_one_of_the_keys_stream_slots():
    """Job events are streams too: 300 of them opened where answers stopped at 20."""
    from ragline.api.auth import key_digest
    from ragline.api.guards import KeyLimits

    limiter = KeyLimiter(per_minute=0, burst=1, max_streams=1)
    held: list[int] = []

    async def app(scope, receive, send):
        held.append(len(limiter._streams.get(key_digest("key-a"), ())))

    async def send(message):
        pass

    for path in ("/api/v1/knowledge-bases/kb/jobs/j/events", "/api/v1/sessions/s/chat", "/api/v1/sessions"):
        scope = {"type": "http", "path": path, "headers": [(b"x-api-key", b"key-a")], "query_string": b""}
        await KeyLimits(app, limiter)(scope, None, send)
    assert held == [1, 1, 0] and limiter._streams == {}


@pytest.fixture(scope="module")
def server(scripted_server) -> Iterator[ThreadServer]:
    settings = memory_settings(scripted_server, api_keys=KEYS, rate_limit_per_minute=600, rate_limit_burst=5, max_streams_per_key=1)
    live = ThreadServer(create_app(settings)).start()
    yield live
    live.stop()


async def test_a_key_over_its_rate_gets_429_with_retry_after_while_another_key_passes(server, scripted_model):
    async with httpx.AsyncClient(base_url=server.url, headers={"X-API-Key": "key-a"}) as acme, \
            httpx.AsyncClient(base_url=server.url, headers={"X-API-Key": "key-b"}) as globex:
        codes = [(await acme.get("/api/v1/sessions")).status_code for _ in range(6)]
        assert codes[:5] == [200] * 5
        limited = await acme.get("/api/v1/sessions")
        assert limited.status_code == 429 and int(limited.headers["retry-after"]) == 1
        assert limited.json()["error"]["code"] == "rate_limited"
        assert (await globex.get("/api/v1/sessions")).status_code == 200


async def test_a_second_concurrent_stream_of_one_key_is_refused(server, scripted_model):
    scripted_model.on(lambda b: True, Reply(chunks=[f"w{i} " for i in range(40)], chunk_delay=0.05))
    async with httpx.AsyncClient(base_url=server.url, headers={"X-API-Key": "key-b"}, timeout=30) as globex:
        first, second = await new_session(globex), await new_session(globex)
        async with globex.stream("POST", f"/api/v1/sessions/{first}/chat", json={"query": "long"}) as streaming:
            assert streaming.status_code == 200
            refused = await globex.post(f"/api/v1/sessions/{second}/chat", json={"query": "again"})
            assert refused.status_code == 429 and refused.json()["error"]["code"] == "too_many_streams"
            async for _ in streaming.aiter_bytes():
                pass
        for _ in range(50):  # the slot frees when the server has finished the response, just after the client
            done = await globex.post(f"/api/v1/sessions/{second}/chat", json={"query": "now"})
            if done.status_code != 429:
                break
            assert done.json()["error"]["code"] == "too_many_streams"
            await asyncio.sleep(0.1)
        assert done.status_code == 200


async def test_a_keys_stream_on_one_replica_counts_on_the_other(redis_server, scripted_server, scripted_model):
    redis_server.flush()
    settings = memory_settings(scripted_server, redis_url=redis_server.url, api_keys=KEYS, max_streams_per_key=1)
    first, second = ThreadServer(create_app(settings)).start(), ThreadServer(create_app(settings)).start()
    scripted_model.on(lambda b: True, Reply(chunks=[f"w{i} " for i in range(40)], chunk_delay=0.05))
    try:
        async with httpx.AsyncClient(base_url=first.url, headers={"X-API-Key": "key-a"}, timeout=30) as on_a, \
                httpx.AsyncClient(base_url=second.url, headers={"X-API-Key": "key-a"}, timeout=30) as on_b:
            session_a, session_b = await new_session(on_a), await new_session(on_b)
            async with on_a.stream("POST", f"/api/v1/sessions/{session_a}/chat", json={"query": "long"}) as streaming:
                assert streaming.status_code == 200
                refused = await on_b.post(f"/api/v1/sessions/{session_b}/chat", json={"query": "again"})
                assert refused.status_code == 429 and refused.json()["error"]["code"] == "too_many_streams"
                async for _ in streaming.aiter_bytes():
                    pass
    finally:
        first.stop()
        second.stop()
