"""/health tells the truth about the stores: 503, naming Redis, while Redis is down; ok again after."""

from __future__ import annotations

import httpx
import pytest

from ragline.api.app import create_app
from tests.api.live import ThreadServer, memory_settings
from tests.redis_server import RedisServer, missing_reason


async def test_health_is_503_naming_redis_while_it_is_down_and_ok_once_it_is_back(scripted_server, tmp_path):
    if reason := missing_reason():
        pytest.skip(reason)
    redis = RedisServer().start()
    port = int(redis.url.rsplit(":", 1)[1].split("/")[0])
    settings = memory_settings(scripted_server, redis_url=redis.url, checkpointer="redis", stream_manager="redis", data_dir=tmp_path)
    live = ThreadServer(create_app(settings)).start()
    try:
        async with httpx.AsyncClient(base_url=live.url, timeout=10) as client:
            up = await client.get("/health")
            assert up.status_code == 200 and up.json()["checks"]["redis"] == "ok"
            redis.stop()
            down = await client.get("/health")
            assert down.status_code == 503 and down.json()["status"] == "unavailable"
            assert down.json()["checks"]["redis"].startswith("down")
            redis = RedisServer(port=port).start()
            assert (await client.get("/health")).status_code == 200
    finally:
        live.stop()
        redis.stop()
