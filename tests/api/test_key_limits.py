"""Each API key gets a request rate and a number of concurrent answer streams; beyond them, 429."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from ragline.api.app import create_app
from ragline.api.guards import KeyLimiter
from tests.api.live import ThreadServer, memory_settings, new_session
from tests.scripted_model import Reply

KEYS = {"key-a": "acme", "key-b": "globex"}


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_key_gets_its_burst_then_the_per_minute_rate():
    clock = FakeClock()
    limiter = KeyLimiter(per_minute=60, burst=3, max_streams=0, clock=clock)
    assert [limiter.retry_after("k") for _ in range(3)] == [None, None, None]
    assert limiter.retry_after("k") == pytest.approx(1.0)  # 60/min: one token a second
    assert limiter.retry_after("other") is None  # keys are counted apart
    clock.now = 1.0
    assert limiter.retry_after("k") is None
    assert limiter.retry_after("k") is not None


def test_streams_are_counted_per_key_and_released():
    limiter = KeyLimiter(per_minute=0, burst=1, max_streams=2)
    assert limiter.open_stream("k") and limiter.open_stream("k")
    assert not limiter.open_stream("k") and limiter.open_stream("other")
    limiter.close_stream("k")
    assert limiter.open_stream("k")


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
