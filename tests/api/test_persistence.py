"""The default backend (SQLite under the data directory): sessions and conversations survive a restart."""

from __future__ import annotations

import httpx

from ragline.api.app import create_app
from ragline.settings import Settings
from tests.api.live import ThreadServer, collect


async def test_sessions_and_messages_survive_a_restart_of_the_service(tmp_path, scripted_model):
    settings = Settings(data_dir=tmp_path, redis_url=None, checkpointer=None, stream_manager=None)
    first = ThreadServer(create_app(settings)).start()
    try:
        async with httpx.AsyncClient(base_url=first.url, timeout=30) as client:
            health = (await client.get("/health")).json()
            assert health["backend"] == {"checkpointer": "sqlite", "streams": "memory", "runs": "memory"}
            sid = (await client.post("/api/v1/sessions", json={"title": "kept"})).json()["id"]
            await collect(client, "POST", f"/api/v1/sessions/{sid}/chat", json={"query": "remember me", "rewrite_enabled": False})
    finally:
        first.stop()
    second = ThreadServer(create_app(settings)).start()
    try:
        async with httpx.AsyncClient(base_url=second.url, timeout=30) as client:
            assert (await client.get(f"/api/v1/sessions/{sid}")).json()["title"] == "kept"
            items = (await client.get(f"/api/v1/sessions/{sid}/messages")).json()["items"]
            assert [m["content"] for m in items] == ["remember me", "scripted answer"]
    finally:
        second.stop()
