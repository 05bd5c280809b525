"""A shared Redis that is full, paused or stopped: every door answers at once with a clear status
(507 naming the cause, 503 saying Redis does not answer), never hangs for the whole pause, keeps
the client's connection, and logs one line instead of a traceback. A real Redis 8, faulted at
runtime with CONFIG SET maxmemory, CLIENT PAUSE and SIGSTOP.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import signal
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
import pytest
import redis as redis_sync

from ragline.api.app import create_app
from ragline.settings import Settings
from tests.api.live import Frame, ThreadServer, answer_of, collect, frames, types
from tests.redis_server import RedisServer
from tests.scripted_model import Reply

KEYS = {"full-key": "acme"}
HEADERS = {"X-API-Key": "full-key"}
PATIENCE_S = 30  # against a fault without end: an answer at all means the wait was bounded
FULL_PAUSE_MS = 12_000  # longer than the limiter's deadline plus one socket timeout (1 s here), far shorter than PATIENCE_S


@dataclass
class Served:
    url: str
    admin: redis_sync.Redis
    server: RedisServer
    replicas: list[str]  # every replica's URL (url is the first's)


@contextmanager
def serving(tmp_path, scripted_server, replicas: int = 1, **overrides) -> Iterator[Served]:
    """`replicas` apps in this process, each with services of its own, on one new Redis."""
    server = RedisServer().start()
    lives = []
    for n in range(replicas):
        settings = Settings(**{"redis_url": server.url, "data_dir": tmp_path / f"replica-{n}", "api_keys": KEYS,
                               "rate_limit_per_minute": 0, "chat_model": "openai/scripted",
                               "chat_api_base": scripted_server.base_url, "chat_api_key": "k", **overrides})
        lives.append(ThreadServer(create_app(settings)).start())
    admin = redis_sync.Redis.from_url(server.url)
    try:
        yield Served(lives[0].url, admin, server, [live.url for live in lives])
    finally:
        assert server._process is not None
        server._process.send_signal(signal.SIGCONT)
        admin.execute_command("CLIENT", "UNPAUSE")
        admin.config_set("maxmemory", 0)
        for live in lives:
            live.stop()
        server.stop()


@pytest.fixture
def full_redis(tmp_path, scripted_server) -> Iterator[Served]:
    with serving(tmp_path, scripted_server) as served:
        yield served


@pytest.fixture
def short_socket_timeout(monkeypatch):
    """A 1 s Redis socket timeout, read when the service makes its clients (so: before create_app)."""
    from ragline import defaults

    monkeypatch.setattr(defaults, "REDIS_SOCKET_TIMEOUT_S", 1.0)


def _fill(admin: redis_sync.Redis) -> None:
    used = int(admin.info("memory")["used_memory"])
    admin.config_set("maxmemory-policy", "noeviction")
    admin.config_set("maxmemory", used + 64 * 1024)
    with pytest.raises(redis_sync.exceptions.OutOfMemoryError):
        for n in range(10_000):
            admin.set(f"ballast:{n}", "x" * 4096)


def _wait_out_the_pause(admin: redis_sync.Redis) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while time.monotonic() < deadline:
        with contextlib.suppress(redis_sync.exceptions.TimeoutError):
            if admin.ping():
                return
    raise AssertionError("Redis stayed paused")


def _exchange(url: str, requests: list[bytes]) -> list[bytes]:
    """Each request sent on ONE connection after the previous answer came back whole; a server
    that drops the connection after an answer makes the next exchange fail."""
    host, port = re.match(r"http://([^:/]+):(\d+)", url).groups()  # type: ignore[union-attr]
    answers = []
    with socket.create_connection((host, int(port)), timeout=PATIENCE_S) as connection:
        reader = connection.makefile("rb")
        for request in requests:
            connection.sendall(request)
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                line = reader.readline()
                if not line:
                    raise ConnectionResetError("the server closed the connection")
                head += line
            length = int(re.search(rb"content-length: (\d+)", head, re.IGNORECASE).group(1))  # type: ignore[union-attr]
            answers.append(head + reader.read(length))
    return answers


def _post(path: str, body: bytes) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: full-key\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def test_a_full_redis_gets_507_naming_the_cause_and_health_reports_it(full_redis):
    base, admin = full_redis.url, full_redis.admin
    assert httpx.get(f"{base}/health").status_code == 200
    _fill(admin)
    refused = [
        httpx.post(f"{base}/api/v1/knowledge-bases", json={"name": "manuals"}, headers=HEADERS),
        httpx.post(f"{base}/api/v1/sessions", json={}, headers=HEADERS),
    ]
    for response in refused:
        assert response.status_code == 507, response.text
        error = response.json()["error"]
        assert error["code"] == "insufficient_storage" and "maxmemory" in error["message"]
        assert "OOM" not in error["message"] and "script" not in error["message"]
    health = httpx.get(f"{base}/health")
    assert health.status_code == 503 and health.json()["checks"]["redis_memory"].startswith("down: StoreFull")
    admin.config_set("maxmemory", 0)
    assert httpx.post(f"{base}/api/v1/knowledge-bases", json={"name": "manuals"}, headers=HEADERS).status_code == 201
    assert httpx.get(f"{base}/health").status_code == 200


def test_after_a_507_the_connection_stays_open_and_the_log_has_one_line_not_a_traceback(full_redis, caplog):
    _fill(full_redis.admin)
    with caplog.at_level(logging.WARNING):
        answers = _exchange(full_redis.url, [_post("/api/v1/knowledge-bases", b'{"name": "a"}'),
                                             _post("/api/v1/sessions", b"{}"),
                                             b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"])
    assert [answer.split(b" ", 2)[1] for answer in answers] == [b"507", b"507", b"503"]
    refusals = [r for r in caplog.records if "maxmemory" in r.getMessage()]
    assert len(refusals) == 2 and all(r.levelno == logging.WARNING and r.exc_info is None for r in refusals)
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR], caplog.text


def test_a_stopped_redis_gets_503_after_the_socket_timeout_and_health_answers(tmp_path, scripted_server, short_socket_timeout):
    with serving(tmp_path, scripted_server) as served:
        assert httpx.get(f"{served.url}/api/v1/knowledge-bases", headers=HEADERS).status_code == 200
        assert served.server._process is not None
        served.server._process.send_signal(signal.SIGSTOP)  # it stops answering, its sockets stay open
        assert httpx.get(f"{served.url}/health", timeout=PATIENCE_S).status_code == 503
        for path in ("/api/v1/knowledge-bases", "/api/v1/sessions"):
            response = httpx.get(f"{served.url}{path}", headers=HEADERS, timeout=PATIENCE_S)
            assert response.status_code == 503, response.text
            assert "Redis" in response.json()["error"]["message"]
        served.server._process.send_signal(signal.SIGCONT)
        assert httpx.get(f"{served.url}/api/v1/knowledge-bases", headers=HEADERS).status_code == 200


def test_under_a_write_pause_keyed_reads_answer_and_the_limits_say_they_did_not_count(tmp_path, scripted_server, short_socket_timeout):
    """The per-key limiter is a write (a Lua script); a paused write must not hold the reads behind it."""
    with serving(tmp_path, scripted_server, rate_limit_per_minute=600) as served:
        session = httpx.post(f"{served.url}/api/v1/sessions", json={}, headers=HEADERS).json()["id"]
        served.admin.execute_command("CLIENT", "PAUSE", PATIENCE_S * 1000 * 4, "WRITE")
        for path in ("/api/v1/knowledge-bases", "/api/v1/sessions", f"/api/v1/sessions/{session}"):
            response = httpx.get(f"{served.url}{path}", headers=HEADERS, timeout=PATIENCE_S)
            assert response.status_code == 200, (path, response.text)
        metrics = httpx.get(f"{served.url}/metrics", timeout=PATIENCE_S).text
        uncounted = re.search(r'ragline_key_limits_uncounted_total\{limit="rate",reason="timeout"\} (\d+)', metrics)
        assert uncounted and int(uncounted.group(1)) >= 1, metrics
        served.admin.execute_command("CLIENT", "UNPAUSE")


def test_under_a_full_pause_keyed_routes_get_503_and_health_answers(tmp_path, scripted_server, short_socket_timeout):
    with serving(tmp_path, scripted_server, rate_limit_per_minute=600) as served:
        # ALL pauses every client, this test's too (even its UNPAUSE): a pause that ends by itself
        served.admin.execute_command("CLIENT", "PAUSE", FULL_PAUSE_MS, "ALL")
        health = httpx.get(f"{served.url}/health", headers=HEADERS, timeout=PATIENCE_S)
        assert health.status_code == 503 and health.json()["checks"]["redis"].startswith("down")
        response = httpx.get(f"{served.url}/api/v1/knowledge-bases", headers=HEADERS, timeout=PATIENCE_S)
        assert response.status_code == 503 and "Redis" in response.json()["error"]["message"]
        _wait_out_the_pause(served.admin)
        assert httpx.get(f"{served.url}/api/v1/knowledge-bases", headers=HEADERS).status_code == 200


async def test_an_answer_streaming_when_redis_fills_ends_with_an_error_at_once(tmp_path, scripted_model):
    """The run fails on its first refused event; its reader is told here, not left with heartbeats."""
    scripted_model.on(lambda body: True, Reply(chunks=[f"w{i} " for i in range(400)], chunk_delay=0.05))
    with serving(tmp_path, scripted_model, sse_heartbeat_s=1.0) as served:
        async with httpx.AsyncClient(base_url=served.url, headers=HEADERS, timeout=PATIENCE_S) as client:
            session = (await client.post("/api/v1/sessions", json={})).json()["id"]
            got: list[Frame] = []
            async with asyncio.timeout(PATIENCE_S):
                async with client.stream("POST", f"/api/v1/sessions/{session}/chat",
                                         json={"query": "Tell me a long story", "rewrite_enabled": False}) as response:
                    assert response.status_code == 200
                    async for each in frames(response):
                        got.append(each)
                        if types(got).count("answer") == 3:
                            _fill(served.admin)
            assert types(got)[-2:] == ["error", "complete"], types(got)
            assert got[-2].event["data"]["code"] == "insufficient_storage" and "maxmemory" in got[-2].event["content"]
            assert len(answer_of(got)) < len("".join(f"w{i} " for i in range(400)))


async def test_a_reader_on_another_replica_learns_at_once_that_the_answer_cannot_be_stored(tmp_path, scripted_model):
    """The run is on replica A; a client follows it on replica B (continue-stream). A's refusal reaches
    B through Redis' PUBLISH, which it still takes at maxmemory."""
    scripted_model.on(lambda body: True, Reply(chunks=[f"w{i} " for i in range(400)], chunk_delay=0.05))
    with serving(tmp_path, scripted_model, replicas=2, sse_heartbeat_s=1.0) as served:
        a, b = served.replicas
        async with (httpx.AsyncClient(base_url=a, headers=HEADERS, timeout=PATIENCE_S) as to_a,
                    httpx.AsyncClient(base_url=b, headers=HEADERS, timeout=PATIENCE_S) as to_b):
            session = (await to_a.post("/api/v1/sessions", json={})).json()["id"]
            on_b: asyncio.Task[list[Frame]] | None = None
            got: list[Frame] = []
            async with asyncio.timeout(PATIENCE_S):
                async with to_a.stream("POST", f"/api/v1/sessions/{session}/chat",
                                       json={"query": "Tell me a long story", "rewrite_enabled": False}) as response:
                    async for each in frames(response):
                        got.append(each)
                        if types(got).count("answer") == 3 and on_b is None:
                            on_b = asyncio.create_task(collect(to_b, "GET", f"/api/v1/sessions/{session}/continue-stream",
                                                               headers={"Last-Event-ID": each.id}))
                            await asyncio.sleep(1.0)  # B is following: it waits for the next event
                            _fill(served.admin)
                assert on_b is not None
                followed = await on_b
            assert types(got)[-2:] == ["error", "complete"], types(got)
            assert types(followed)[-2:] == ["error", "complete"], types(followed)
            assert followed[-2].event["data"]["code"] == "insufficient_storage"
