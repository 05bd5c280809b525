"""Images over HTTP, offline (issue 14, "done when"): a PDF with an embedded chart and a PNG screenshot
are uploaded, the screenshot's text is read by OCR, and a question only that text answers finds the
image_ocr chunk and cites it. Refused uploads (a bomb, a fake image) are clear 4xx and keep nothing."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from tests.api.jobs import ingested
from tests.api.live import ThreadServer, collect, memory_settings, serve_embedded
from tests.ingestion.image_fixtures import bomb_png, chart_image, pdf_with_image, screenshot_png
from tests.scripted_model import Reply

V1 = "/api/v1"
SCREEN = ["Error E42: anemometer bearing worn", "Replace the bearing with part AB-7"]


@pytest.fixture(scope="module")
def server(tmp_path_factory, scripted_server) -> Iterator[ThreadServer]:
    root = tmp_path_factory.mktemp("images-api")
    settings = memory_settings(scripted_server, data_dir=root)  # no vlm_model: OCR alone, offline
    live = serve_embedded(root, settings)
    yield live
    live.stop()


@pytest.fixture
async def client(server, scripted_model) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=120) as http:
        yield http


async def upload(client: httpx.AsyncClient, kb: str, name: str, data: bytes, mime: str) -> httpx.Response:
    return await client.post(f"{V1}/knowledge-bases/{kb}/documents", files={"file": (name, data, mime)})


async def test_a_question_only_the_screenshot_answers_finds_its_ocr_chunk_and_cites_it(client, scripted_model, server):
    kb = (await client.post(f"{V1}/knowledge-bases", json={"name": "station-images"})).json()["id"]
    report = await upload(client, kb, "report.pdf", pdf_with_image("Quarterly report of the Aurora station.", chart_image()), "application/pdf")
    screen = await upload(client, kb, "error-screen.png", screenshot_png(SCREEN), "image/png")
    await ingested(client, report)
    screen_document = await ingested(client, screen)
    chunks = (await client.get(f"{V1}/knowledge-bases/{kb}/documents/{screen_document['id']}/chunks")).json()["items"]
    assert [(c["chunk_type"], c["content"]) for c in chunks] == [("image_ocr", "\n".join(SCREEN))]
    [image] = chunks[0]["metadata"]["images"]
    assert re.fullmatch(r"local://images/[0-9a-f]{64}\.png", image["url"]) and image["ocr_text"] == chunks[0]["content"]

    found = (await client.post(f"{V1}/knowledge-bases/search", json={"query": "What does error E42 mean?", "knowledge_base_ids": [kb]})).json()
    assert found["items"][0]["id"] == chunks[0]["id"]

    scripted_model.on(lambda body: True, Reply(chunks=["The anemometer bearing is worn", ' <ref id="c1"/>', "."]))
    sid = (await client.post(f"{V1}/sessions", json={"title": "E42"})).json()["id"]
    question = {"query": "What does error E42 mean?", "knowledge_base_ids": [kb], "rewrite_enabled": False}
    got = await collect(client, "POST", f"{V1}/sessions/{sid}/knowledge-chat", json=question)
    references = next(f.event["knowledge_references"] for f in got if f.type == "references")
    assert references[0]["chunk_id"] == chunks[0]["id"] and references[0]["chunk_type"] == "image_ocr"
    answer = "".join(f.event.get("content", "") for f in got if f.type == "answer")
    assert re.search(rf'<kb [^>]*chunk_id="{chunks[0]["id"]}"', answer), answer
    prompt = str(scripted_model.requests[-1]["messages"])
    assert "Error E42: anemometer bearing worn" in prompt and "res://0001" in prompt  # the image handle is aliased
    assert image["url"] not in prompt


async def test_a_decompression_bomb_and_a_fake_image_are_refused_and_nothing_is_kept(client):
    kb = (await client.post(f"{V1}/knowledge-bases", json={"name": "refusals"})).json()["id"]
    bomb = await upload(client, kb, "bomb.png", bomb_png(), "image/png")
    assert bomb.status_code == 413 and "pixels" in bomb.json()["error"]["message"]
    fake = await upload(client, kb, "photo.jpg", b"GIF89a? no: " + b"\x00\x01garbage" * 50, "image/jpeg")
    assert fake.status_code == 400 and "not a PNG, JPEG, WebP or GIF image" in fake.json()["error"]["message"]
    assert (await client.get(f"{V1}/knowledge-bases/{kb}/documents")).json()["items"] == []
