"""The wiki routes in a shared deployment read the status and start a rebuild without a Redis call
on the event loop (a sync client there would stall every stream the replica serves)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from ragline.api.app import create_app
from ragline.services import Services
from tests.api.live import ThreadServer, memory_settings
from tests.api.test_wiki_api import PAIRING, script_pages
from tests.ingestion.test_wiki_scheduler import record_wiki_calls
from tests.redis_server import RedisServer
from tests.scripted_model import ScriptedModel

V1 = "/api/v1"


async def test_the_wiki_routes_make_no_redis_call_on_the_event_loop(
        redis_server: RedisServer, scripted_model: ScriptedModel, embedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    redis_server.flush()
    services = Services(memory_settings(scripted_model, data_dir=tmp_path, redis_url=redis_server.url), embedder_factory=lambda: embedder)
    live = ThreadServer(create_app(services.settings, services=services)).start()
    script_pages(scripted_model)
    calls = record_wiki_calls(monkeypatch)
    try:
        async with httpx.AsyncClient(base_url=live.url, timeout=60) as client:
            kb = (await client.post(f"{V1}/knowledge-bases", json={"name": "wiki-routes", "wiki_enabled": True})).json()["id"]
            await client.post(f"{V1}/knowledge-bases/{kb}/documents/text", json={"title": PAIRING[0], "text": PAIRING[1]})
            started = await client.post(f"{V1}/knowledge-bases/{kb}/wiki/rebuild")
            # the scripted model writes pages fast: the rebuild the upload started may be done already
            assert started.status_code == 202 and started.json()["state"] in {"building", "ok"}
            status = await client.get(f"{V1}/knowledge-bases/{kb}/wiki")
            assert status.status_code == 200 and status.json()["enabled"]
    finally:
        live.stop()
        await services.aclose()
    assert {"HINCRBY", "EVALSHA", "GET"} <= {command for command, _ in calls}
    assert [command for command, on_loop in calls if on_loop] == []
