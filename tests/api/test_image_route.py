"""GET /api/v1/images/<name>: a stored image, only for a tenant that may read a knowledge base
whose chunks cite it, with its content type; any other name is the same 404. And images through
knowledge-chat: the scripted chat model is a vision model here, so it gets the retrieved
screenshot and the attached image, and the question's stored image keeps the rewrite's caption."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragline.api.app import create_app
from ragline.contracts.access import AccessRule, Principal
from ragline.services import Services
from tests.api.live import ThreadServer, collect, embedded_services, memory_settings
from tests.ingestion.image_fixtures import screenshot_png
from tests.scripted_model import Reply, ScriptedModel

V1 = "/api/v1"
KEYS: dict[str, Any] = {"key-a": "acme", "key-b": "globex", "key-a-eve": "acme/eve",
                        "key-a-sam": {"tenant": "acme", "user": "sam", "groups": ["support"]}}


@pytest.fixture(scope="module")
def world(tmp_path_factory, scripted_server) -> Iterator[tuple[ThreadServer, Services, Path]]:
    root = tmp_path_factory.mktemp("image-route")
    settings = memory_settings(scripted_server, data_dir=root, api_keys=KEYS, vision_models=["openai/scripted"])
    core = embedded_services(root, settings)
    live = ThreadServer(create_app(settings, services=core)).start()
    yield live, core, root
    live.stop()


@pytest.fixture
async def clients(world) -> AsyncIterator[dict[str, httpx.AsyncClient]]:
    live = world[0]
    made = {name: httpx.AsyncClient(base_url=live.url, timeout=60, headers={"X-API-Key": key}) for name, key in
            {"a": "key-a", "b": "key-b"}.items()}
    made["anonymous"] = httpx.AsyncClient(base_url=live.url, timeout=60)
    yield made
    for client in made.values():
        await client.aclose()


async def screenshot_of_acme(world: Any, clients: dict[str, httpx.AsyncClient], tmp_path: Path) -> tuple[str, str]:
    """Tenant acme's knowledge base gets a screenshot: (the base's id, the route name of the stored image)."""
    core = world[1]
    kb = (await clients["a"].post(f"{V1}/knowledge-bases", json={"name": f"screens-{tmp_path.name}"})).json()["id"]
    path = tmp_path / "screen.png"
    path.write_bytes(screenshot_png(["Error E42: bearing worn"]))
    knowledge = await core.ingestion.ingest_file(kb, path, tenant_id="acme")
    [chunk] = [c for c in core.retrieval.catalog.chunks_of(knowledge.id) if c.metadata.get("images")]
    return kb, str(chunk.metadata["images"][0]["url"]).removeprefix("local://images/")


async def image_of_acme(world: Any, clients: dict[str, httpx.AsyncClient], tmp_path: Path) -> str:
    return (await screenshot_of_acme(world, clients, tmp_path))[1]


async def test_an_image_cited_by_a_readable_knowledge_base_is_served_with_its_content_type(world, clients, tmp_path):
    name = await image_of_acme(world, clients, tmp_path)
    got = await clients["a"].get(f"{V1}/images/{name}")
    assert got.status_code == 200 and got.headers["content-type"] == "image/png"
    assert got.content == screenshot_png(["Error E42: bearing worn"]) and got.headers["x-content-type-options"] == "nosniff"


async def test_another_tenant_and_no_key_get_nothing(world, clients, tmp_path):
    name = await image_of_acme(world, clients, tmp_path)
    refused = await clients["b"].get(f"{V1}/images/{name}")
    assert refused.status_code == 404 and refused.json()["error"]["message"] == "no such image"
    assert (await clients["anonymous"].get(f"{V1}/images/{name}")).status_code == 401


async def test_an_image_follows_the_rule_of_the_documents_that_show_it(world, clients, tmp_path):
    """Shown only by a document restricted to a group: served to its members alone."""
    core = world[1]
    kb = (await clients["a"].post(f"{V1}/knowledge-bases", json={"name": "support-screens"})).json()["id"]
    path = tmp_path / "restricted.png"
    path.write_bytes(screenshot_png(["Support only: reset code 7731"]))
    knowledge = await core.ingestion.ingest_file(kb, path, tenant_id="acme")
    [chunk] = [c for c in core.retrieval.catalog.chunks_of(knowledge.id) if c.metadata.get("images")]
    name = str(chunk.metadata["images"][0]["url"]).removeprefix("local://images/")
    core.retrieval.knowledge_bases.set_document_access(knowledge.id, Principal.operator_of("acme"), AccessRule(groups=["support"]))
    async with httpx.AsyncClient(base_url=world[0].url, timeout=60, headers={"X-API-Key": "key-a-eve"}) as eve, \
            httpx.AsyncClient(base_url=world[0].url, timeout=60, headers={"X-API-Key": "key-a-sam"}) as sam:
        assert (await eve.get(f"{V1}/images/{name}")).status_code == 404
        assert (await sam.get(f"{V1}/images/{name}")).status_code == 200


async def test_a_stored_file_no_chunk_cites_is_not_served(world, clients):
    orphan = "f" * 64 + ".png"
    (world[2] / "images").mkdir(exist_ok=True)
    (world[2] / "images" / orphan).write_bytes(screenshot_png(["orphan"]))
    assert (await clients["a"].get(f"{V1}/images/{orphan}")).status_code == 404


@pytest.mark.parametrize("name", ["..%2Fcatalog.sqlite", "%2E%2E%2F%2E%2E%2Fetc%2Fpasswd", "0" * 64 + ".svg", "0" * 63 + ".png", "a.png"])
async def test_names_that_are_not_content_addresses_never_reach_the_disk(world, clients, name):
    got = await clients["a"].get(f"{V1}/images/{name}")
    assert got.status_code == 404, got.text


async def test_knowledge_chat_sends_a_vision_model_the_retrieved_image_and_the_attached_one(world, clients, tmp_path, scripted_server: ScriptedModel):
    scripted_server.reset()
    kb, name = await screenshot_of_acme(world, clients, tmp_path)
    await world[1].ingestion.ingest_text(kb, "The rain gauge empties itself every morning at six.", title="Rain gauge", tenant_id="acme")
    rewrite = '{"rewrite_query": "What does error E42 mean?", "intent": "kb_search", "image_description": "a red warning light"}'
    scripted_server.on(lambda body: "response_format" in body, Reply.text(rewrite))
    scripted_server.on(lambda body: True, Reply.text("The bearing is worn."))
    attached = "data:image/png;base64," + base64.b64encode(screenshot_png(["WARN"], size=(120, 60))).decode()
    sid = (await clients["a"].post(f"{V1}/sessions", json={"title": "E42"})).json()["id"]
    question = {"query": "What does error E42 mean?", "knowledge_base_ids": [kb], "images": [{"url": attached}]}
    frames = await collect(clients["a"], "POST", f"{V1}/sessions/{sid}/knowledge-chat", json=question)

    references = next(f.event["knowledge_references"] for f in frames if f.type == "references")
    assert references[0]["metadata"]["images"][0]["url"] == f"local://images/{name}"  # what the page turns into a thumbnail
    content = scripted_server.requests[-1]["messages"][-1]["content"]
    stored = (world[2] / "images" / name).read_bytes()
    assert [p["image_url"]["url"] for p in content if p["type"] == "image_url"] == [
        "data:image/png;base64," + base64.b64encode(stored).decode(), attached]
    messages = (await clients["a"].get(f"{V1}/sessions/{sid}/messages")).json()["items"]
    user = next(m for m in messages if m["role"] == "user")
    assert user["images"] == [{"url": attached, "caption": "a red warning light"}]
