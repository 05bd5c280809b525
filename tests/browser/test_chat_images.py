"""Pictures on the chat page, in headless Chromium: a picture attached to a question reaches the
(scripted, vision) model and stays in the question's bubble after a reload; the answer shows the
image of the screenshot passage it drew on as a thumbnail served by GET /api/v1/images/<name>,
and the thumbnail opens that passage in the references panel."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ragline.api.app import create_app
from ragline.services import Services
from tests.api.live import ThreadServer, embedded_services, memory_settings
from tests.browser.conftest import KEYS
from tests.ingestion.image_fixtures import screenshot_png
from tests.scripted_model import Reply, ScriptedModel

QUESTION = "What does error E42 mean?"
SCREEN = ["Error E42: anemometer bearing worn", "Replace the bearing with part AB-7"]


async def _fill(core: Services, root: Path) -> None:
    kb = core.retrieval.knowledge_bases.create("station screens", "default")
    screen = root / "error-screen.png"
    screen.write_bytes(screenshot_png(SCREEN))
    await core.ingestion.ingest_file(kb.id, screen)
    await core.ingestion.ingest_text(kb.id, "The rain gauge empties itself every morning at six.", title="Rain gauge")


@pytest.fixture(scope="module")
def service(scripted_server: ScriptedModel, tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[ThreadServer]:
    """This module's own service (overrides conftest's sample server): a knowledge base holding a screenshot."""
    root = tmp_path_factory.mktemp("browser-images")
    settings = memory_settings(scripted_server, data_dir=root, api_keys=KEYS, vision_models=["openai/scripted"])
    core = embedded_services(root, settings, embedder)
    with ThreadPoolExecutor(1) as worker:  # a loop of its own: the browser tests' thread already runs one
        worker.submit(asyncio.run, _fill(core, root)).result()
    live = ThreadServer(create_app(settings, services=core)).start()
    yield live
    live.stop()


def script(model: ScriptedModel) -> None:
    model.on(lambda body: "short title" in str(body.get("messages")), Reply.text("Error E42"))
    rewrite = {"rewrite_query": QUESTION, "intent": "kb_search", "image_description": "a blinking red warning light"}
    model.on(lambda body: "response_format" in body, Reply(chunks=[json.dumps(rewrite)]))
    model.on(lambda body: True, Reply.text('The anemometer bearing is worn <ref id="c1"/>.'))


def test_an_attached_picture_is_sent_and_the_answer_shows_the_image_it_drew_on(page, model, tmp_path):
    script(model)
    picture = tmp_path / "warning.png"
    picture.write_bytes(screenshot_png(["WARN"], size=(160, 80)))
    page.set_input_files("#attach-input", str(picture))
    page.locator("#attachments img.thumb").wait_for()
    page.fill("#question", QUESTION)
    page.click("#ask")

    page.locator(".msg.assistant.done").wait_for()
    assert page.locator("#attachments").is_hidden()  # sent with the question, gone from the composer
    bubble = page.locator(".msg.user .question-images img")
    assert bubble.get_attribute("src") == "data:image/png;base64," + base64.b64encode(picture.read_bytes()).decode()
    answer = [body for body in model.requests if "response_format" not in body and "short title" not in str(body)][-1]
    sent = [part["image_url"]["url"] for part in answer["messages"][-1]["content"] if part["type"] == "image_url"]
    assert sent[-1] == bubble.get_attribute("src") and len(sent) == 2  # the screenshot passage's image, then the attached one

    thumbnail = page.locator('.answer-images img.thumb[src^="data:image/png;base64,"]')
    thumbnail.wait_for()
    assert thumbnail.evaluate("img => img.naturalWidth") == 900  # the stored screenshot, fetched with the API key
    page.click(".answer-image")
    card = page.locator("#ref-list .ref.focused")
    assert "Error E42" in card.inner_text() and card.locator(".ref-images img.thumb").count() == 1

    page.reload()
    page.locator(".msg.user .question-images img").wait_for()  # a stored question keeps its picture
    assert page.locator(".msg.user .question-images img").get_attribute("title") == "a blinking red warning light"
    page.locator(".answer-images img.thumb").wait_for()


def test_a_file_that_is_not_a_picture_is_refused_with_a_notice(page, tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a picture")
    page.set_input_files("#attach-input", str(text))
    page.locator("#notice-text").wait_for()
    assert "not a PNG, JPEG, WebP or GIF picture" in page.inner_text("#notice-text")
    assert page.locator("#attachments").is_hidden()
