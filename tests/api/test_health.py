"""While Redis is down: /health says so (503), routes answer 503 instead of 500; after it returns, all works again."""

from __future__ import annotations

import httpx
import pytest

from ragline.api.app import create_app
from tests.api.live import ThreadServer, collect, memory_settings, new_session, types
from tests.redis_server import RedisServer, missing_reason
from tests.scripted_model import Reply


async def test_health_is_503_naming_redis_while_it_is_down_and_ok_once_it_is_back(scripted_server, scripted_model, tmp_path):
    if reason := missing_reason():
        pytest.skip(reason)
    redis = RedisServer().start()
    port = int(redis.url.rsplit(":", 1)[1].split("/")[0])
    settings = memory_settings(scripted_server, redis_url=redis.url, checkpointer="redis", stream_manager="redis", data_dir=tmp_path)
    live = ThreadServer(create_app(settings)).start()
    try:
        # Redis restarts take seconds on a loaded host: a kept-alive connection idle for as long as
        # uvicorn's 5 s would meet the server closing it (ReadError), so the client lets go first.
        async with httpx.AsyncClient(base_url=live.url, timeout=10, limits=httpx.Limits(keepalive_expiry=1)) as client:
            up = await client.get("/health")
            assert up.status_code == 200 and up.json()["checks"]["redis"] == "ok"
            redis.stop()
            down = await client.get("/health")
            assert down.status_code == 503 and down.json()["status"] == "unavailable"
            assert down.json()["checks"]["redis"].startswith("down")
            listing = await client.get("/api/v1/sessions")  # a route that needs Redis: 503, not a generic 500
            assert listing.status_code == 503 and "Redis" in listing.json()["error"]["message"]
            redis = RedisServer(port=port).start()
            assert (await client.get("/health")).status_code == 200
            assert (await client.get("/api/v1/sessions")).status_code == 200  # stale connections were replaced
            # Redis came back empty: the checkpoint search indexes are recreated on first need
            scripted_model.on(lambda b: True, Reply.text("First answer."))
            sid = await new_session(client)
            frames = await collect(client, "POST", f"/api/v1/sessions/{sid}/chat", json={"query": "one", "rewrite_enabled": False})
            assert types(frames)[-1] == "complete" and "error" not in types(frames)
            messages = (await client.get(f"/api/v1/sessions/{sid}/messages")).json()["items"]
            rewound = await client.post(f"/api/v1/sessions/{sid}/rewind", json={"message_id": messages[0]["id"]})
            assert rewound.status_code == 200, rewound.text
    finally:
        live.stop()
        redis.stop()


async def test_health_reports_the_knowledge_catalog_once_it_is_open_and_never_opens_it_itself(scripted_server, tmp_path):
    from tests.api.live import embedded_services

    settings = memory_settings(scripted_server, data_dir=tmp_path)
    core = embedded_services(tmp_path, settings)
    live = ThreadServer(create_app(settings, services=core)).start()
    try:
        async with httpx.AsyncClient(base_url=live.url, timeout=10) as client:
            assert "catalog" not in (await client.get("/health")).json()["checks"] and not core.is_open("retrieval")
            assert (await client.get("/api/v1/knowledge-bases")).status_code == 200  # opens the stores
            assert (await client.get("/health")).json()["checks"]["catalog"] == "ok"

            def broken(_kb_id: str) -> None:
                raise OSError("disk I/O error")

            core.retrieval.catalog.get_kb = broken  # the catalog's file went away under the service
            down = await client.get("/health")
            assert down.status_code == 503 and down.json()["checks"]["catalog"] == "down: OSError: disk I/O error"
    finally:
        live.stop()
