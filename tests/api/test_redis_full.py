"""A shared Redis at maxmemory (noeviction): every door answers 507 naming the cause, never a
500 or Redis' own text, and /health says the store is full. A real Redis 8, shrunk at runtime."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import httpx
import pytest
import redis as redis_sync

from ragline.api.app import create_app
from ragline.settings import Settings
from tests.api.live import ThreadServer
from tests.redis_server import RedisServer

KEYS = {"full-key": "acme"}


@pytest.fixture
def full_redis(tmp_path, scripted_server) -> Iterator[tuple[str, redis_sync.Redis]]:
    server = RedisServer().start()
    settings = Settings(redis_url=server.url, data_dir=tmp_path, api_keys=KEYS, rate_limit_per_minute=0,
                        chat_model="openai/scripted", chat_api_base=scripted_server.base_url, chat_api_key="k")
    live = ThreadServer(create_app(settings)).start()
    admin = redis_sync.Redis.from_url(server.url)
    try:
        yield live.url, admin
    finally:
        admin.config_set("maxmemory", 0)
        live.stop()
        server.stop()


def _fill(admin: redis_sync.Redis) -> None:
    used = int(admin.info("memory")["used_memory"])
    admin.config_set("maxmemory-policy", "noeviction")
    admin.config_set("maxmemory", used + 64 * 1024)
    with pytest.raises(redis_sync.exceptions.OutOfMemoryError):
        for n in range(10_000):
            admin.set(f"ballast:{n}", "x" * 4096)


def test_a_full_redis_gets_507_naming_the_cause_and_health_reports_it(full_redis):
    base, admin = full_redis
    headers = {"X-API-Key": "full-key"}
    assert httpx.get(f"{base}/health").status_code == 200
    _fill(admin)
    refused = [
        httpx.post(f"{base}/api/v1/knowledge-bases", json={"name": "manuals"}, headers=headers),
        httpx.post(f"{base}/api/v1/sessions", json={}, headers=headers),
    ]
    for response in refused:
        assert response.status_code == 507, response.text
        error = response.json()["error"]
        assert error["code"] == "insufficient_storage" and "maxmemory" in error["message"]
        assert "OOM" not in error["message"] and "script" not in error["message"]
    health = httpx.get(f"{base}/health")
    assert health.status_code == 503 and health.json()["checks"]["redis_memory"].startswith("down: StoreFull")
    admin.config_set("maxmemory", 0)
    assert httpx.post(f"{base}/api/v1/knowledge-bases", json={"name": "manuals"}, headers=headers).status_code == 201
    assert httpx.get(f"{base}/health").status_code == 200


def test_a_paused_redis_gets_503_after_the_socket_timeout_not_a_hang(tmp_path, scripted_server, monkeypatch):
    from ragline import defaults

    monkeypatch.setattr(defaults, "REDIS_SOCKET_TIMEOUT_S", 1.0)  # read when the clients are made, below
    server = RedisServer().start()
    settings = Settings(redis_url=server.url, data_dir=tmp_path, api_keys=KEYS, rate_limit_per_minute=0,
                        chat_model="openai/scripted", chat_api_base=scripted_server.base_url, chat_api_key="k")
    live = ThreadServer(create_app(settings)).start()
    headers = {"X-API-Key": "full-key"}
    try:
        assert httpx.get(f"{live.url}/api/v1/knowledge-bases", headers=headers).status_code == 200
        assert server._process is not None
        server._process.send_signal(signal.SIGSTOP)  # the server stops answering, its sockets stay open
        for path in ("/api/v1/knowledge-bases", "/api/v1/sessions"):
            # 30 s of patience against a pause without end: an answer at all means the wait was bounded
            response = httpx.get(f"{live.url}{path}", headers=headers, timeout=30)
            assert response.status_code == 503, response.text
            assert "Redis" in response.json()["error"]["message"]
    finally:
        server._process.send_signal(signal.SIGCONT)
        live.stop()
        server.stop()
