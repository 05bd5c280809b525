"""Document images in a shared deployment (issue 12): replica A ingests a screenshot, replica B
(another data directory, the same Redis 8) serves it through the image route and sends it to a
vision model with the answer's context; no replica keeps an images/ folder. The handles stay
`local://images/<sha>.<ext>`, so chunks and the page are the same in both modes."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragline.api.app import create_app
from ragline.ingestion.image_store import RedisImageStore
from ragline.ingestion.images import inspect_image
from ragline.services import Services
from tests.api.live import ThreadServer, collect, memory_settings
from tests.ingestion.image_fixtures import screenshot_png
from tests.redis_server import RedisServer
from tests.scripted_model import Reply, ScriptedModel

V1 = "/api/v1"
KEYS = {"key-a": "acme", "key-b": "globex"}
SCREEN = ["Error E42: bearing worn"]


def replica(redis: RedisServer, scripted: ScriptedModel, data_dir: Path, embedder: Any) -> Services:
    settings = memory_settings(scripted, data_dir=data_dir, api_keys=KEYS, vision_models=["openai/scripted"],
                               redis_url=redis.url, serve_runs_jobs=False)
    return Services(settings, embedder_factory=lambda: embedder)


@pytest.fixture(scope="module")
def world(redis_server: RedisServer, scripted_server: ScriptedModel, embedder, tmp_path_factory) -> Iterator[tuple[Services, ThreadServer, Path]]:
    """Replica A's services (it ingests), replica B's live app (it serves), and the root of both data directories."""
    redis_server.flush()
    root = tmp_path_factory.mktemp("shared-images")
    a = replica(redis_server, scripted_server, root / "a", embedder)
    b = replica(redis_server, scripted_server, root / "b", embedder)
    live = ThreadServer(create_app(b.settings, services=b)).start()
    yield a, live, root
    live.stop()


@pytest.fixture
async def client(world) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=world[1].url, timeout=60, headers={"X-API-Key": "key-a"}) as http:
        yield http


async def screenshot_on_a(world: Any, client: httpx.AsyncClient, tmp_path: Path) -> tuple[str, str]:
    """A knowledge base made on B, a screenshot ingested into it by A: (its id, the image's route name)."""
    kb = (await client.post(f"{V1}/knowledge-bases", json={"name": f"screens-{tmp_path.name}"})).json()["id"]
    path = tmp_path / "screen.png"
    path.write_bytes(screenshot_png(SCREEN))
    knowledge = await world[0].ingestion.ingest_file(kb, path, tenant_id="acme")
    [chunk] = [c for c in world[0].retrieval.catalog.chunks_of(knowledge.id) if c.metadata.get("images")]
    return kb, str(chunk.metadata["images"][0]["url"]).removeprefix("local://images/")


def test_an_image_is_stored_once_under_its_content_address_and_crafted_handles_read_nothing(redis_server):
    redis_server.flush()
    from redis import Redis

    store = RedisImageStore(Redis.from_url(redis_server.url))
    image = inspect_image(screenshot_png(["once"]), "a test image")
    store.save(image)
    store.save(image)
    assert store.read(image.url) == image.data
    assert store.client.keys("ragline:image:*") == [f"ragline:image:{image.sha256}.png".encode()]
    for crafted in ("local://images/../../etc/passwd", "https://x/y.png", f"local://images/{image.sha256}.svg"):
        assert store.read(crafted) is None


async def test_an_image_ingested_on_one_replica_is_served_by_another(world, client, tmp_path):
    _, name = await screenshot_on_a(world, client, tmp_path)
    got = await client.get(f"{V1}/images/{name}")
    assert got.status_code == 200 and got.headers["content-type"] == "image/png", got.text
    assert got.content == screenshot_png(SCREEN) and got.headers["x-content-type-options"] == "nosniff"
    refused = await client.get(f"{V1}/images/{name}", headers={"X-API-Key": "key-b"})
    assert refused.status_code == 404  # another tenant: the same answer as a missing image
    assert (await client.get(f"{V1}/images/{'f' * 64}.png")).status_code == 404
    assert list(world[2].rglob("images")) == []


async def test_the_answer_on_another_replica_sends_the_stored_image_to_a_vision_model(world, client, tmp_path, scripted_model: ScriptedModel):
    kb, _ = await screenshot_on_a(world, client, tmp_path)
    await world[0].ingestion.ingest_text(kb, "The rain gauge empties itself every morning at six.", title="Rain gauge", tenant_id="acme")
    scripted_model.on(lambda body: True, Reply.text("The bearing is worn."))
    sid = (await client.post(f"{V1}/sessions", json={"title": "E42"})).json()["id"]
    question = {"query": "What does error E42 mean?", "knowledge_base_ids": [kb], "rewrite_enabled": False}
    frames = await collect(client, "POST", f"{V1}/sessions/{sid}/knowledge-chat", json=question)
    assert frames[-1].type == "complete", [f.type for f in frames]
    content = scripted_model.requests[-1]["messages"][-1]["content"]
    assert [p["image_url"]["url"] for p in content if p["type"] == "image_url"] == [
        "data:image/png;base64," + base64.b64encode(screenshot_png(SCREEN)).decode()]
    assert list(world[2].rglob("images")) == []
