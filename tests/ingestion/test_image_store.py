"""Document images in Redis (shared mode) live while a document shows them: deleting a document or
a knowledge base releases the images no other document shows (they expire after a grace period),
and an ingestion of the same bytes under way at that moment keeps its image (ingestion/image_store.py)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ragline.contracts.access import Principal
from ragline.ingestion.image_store import KEY_PREFIX, RedisImageStore
from ragline.ingestion.images import ExtractedImage, inspect_image, markdown_reference
from ragline.ingestion.ocr import OcrEngine
from ragline.ingestion.service import TextDocument
from ragline.services import Services
from tests.api.live import memory_settings
from tests.ingestion.image_fixtures import chart_image, png_of
from tests.redis_server import RedisServer
from tests.scripted_model import ScriptedModel

GRACE_S = 1  # how long a released image lives on here (a day in a deployment)


class GatedOcr(OcrEngine):
    """Reads every image as one line of text (no model), and waits at `gate` while it is set."""

    def __init__(self) -> None:
        super().__init__()
        self.gate: threading.Event | None = None
        self.entered = threading.Event()

    def read(self, data: bytes) -> str:
        self.entered.set()  # the image was saved: ImageIndexer.read stores it before reading it
        if self.gate is not None:
            self.gate.wait(30)
        return "Monthly rainfall in millimetres"


@pytest.fixture
async def shared(redis_server: RedisServer, scripted_model: ScriptedModel, embedder, tmp_path: Path) -> AsyncIterator[Services]:
    """Services of one replica on a flushed shared Redis; images read by GatedOcr, released for GRACE_S."""
    redis_server.flush()
    services = Services(memory_settings(scripted_model, data_dir=tmp_path, redis_url=redis_server.url), embedder_factory=lambda: embedder)
    services.images.ocr = GatedOcr()
    store(services).grace_s = GRACE_S
    yield services
    await services.aclose()


def store(services: Services) -> RedisImageStore:
    images = services.images.store
    assert isinstance(images, RedisImageStore)
    return images


def picture(label: str) -> ExtractedImage:
    return inspect_image(png_of(chart_image(label)), f"{label}.png", alt=label)


def document(source: str, *images: ExtractedImage) -> TextDocument:
    text = "The station logs rainfall every morning.\n\n" + "\n\n".join(markdown_reference(i) for i in images)
    return TextDocument(text, source, source, "md", images=list(images))


def ttl(services: Services, image: ExtractedImage) -> int:
    """Seconds the image has left: -1 while it is kept, -2 once it is gone."""
    return int(store(services).client.ttl(f"{KEY_PREFIX}{image.sha256}.{image.ext}"))


async def gone(services: Services, image: ExtractedImage) -> bool:
    for _ in range(50):  # up to 5 s, for a TTL of GRACE_S
        if ttl(services, image) == -2:
            return True
        await asyncio.sleep(0.1)
    return False


async def test_deleting_a_document_removes_the_images_no_other_document_shows(shared: Services):
    rain, wind = picture("Rainfall"), picture("Wind")
    first = shared.retrieval.knowledge_bases.create("station")
    other = shared.retrieval.knowledge_bases.create("archive")
    [leaving] = await shared.ingestion.ingest_documents(first.id, [document("log.md", rain, wind)])
    await shared.ingestion.ingest_documents(other.id, [document("copy.md", rain)])  # the same rain chart, in another base

    await shared.ingestion.delete_knowledge(first.id, leaving.id)
    assert 0 < ttl(shared, wind) <= GRACE_S and ttl(shared, rain) == -1
    assert await gone(shared, wind)
    assert store(shared).read(rain.url) == rain.data


async def test_deleting_a_knowledge_base_removes_its_images_but_not_those_another_base_shows(shared: Services):
    rain, wind = picture("Rainfall"), picture("Wind")
    first = shared.retrieval.knowledge_bases.create("station")
    other = shared.retrieval.knowledge_bases.create("archive")
    await shared.ingestion.ingest_documents(first.id, [document("log.md", rain, wind), document("notes.md", wind)])
    await shared.ingestion.ingest_documents(other.id, [document("copy.md", rain)])

    await shared.retrieval.knowledge_bases.delete(first.id, Principal.operator_of("default"))
    assert 0 < ttl(shared, wind) <= GRACE_S and ttl(shared, rain) == -1
    assert await gone(shared, wind)
    await shared.retrieval.knowledge_bases.delete(other.id, Principal.operator_of("default"))
    assert await gone(shared, rain)


async def test_an_ingestion_under_way_when_its_image_is_released_keeps_it(shared: Services):
    rain = picture("Rainfall")
    kb = shared.retrieval.knowledge_bases.create("station")
    [leaving] = await shared.ingestion.ingest_documents(kb.id, [document("log.md", rain)])
    ocr = shared.images.ocr
    assert isinstance(ocr, GatedOcr)
    ocr.gate, ocr.entered = threading.Event(), threading.Event()
    coming = asyncio.create_task(shared.ingestion.ingest_documents(kb.id, [document("copy.md", rain)]))
    assert await asyncio.to_thread(ocr.entered.wait, 30)  # saved (SET NX: it was there), not yet committed

    await shared.ingestion.delete_knowledge(kb.id, leaving.id)  # no committed document shows it now: released
    assert 0 < ttl(shared, rain) <= GRACE_S
    ocr.gate.set()
    await coming
    assert ttl(shared, rain) == -1  # its commit kept it
    await asyncio.sleep(GRACE_S + 0.5)
    assert store(shared).read(rain.url) == rain.data


def test_saving_a_released_image_again_gives_it_the_whole_grace_period_and_a_kept_one_stays_kept(redis_server: RedisServer):
    redis_server.flush()
    from redis import Redis

    images = RedisImageStore(Redis.from_url(redis_server.url), grace_s=600)
    released, kept = picture("Rainfall"), picture("Wind")
    images.save(released)
    images.save(kept)
    images.client.expire(f"{KEY_PREFIX}{released.sha256}.png", 3)  # a release whose grace is nearly over
    images.save(released)  # an ingestion of the same bytes starts now
    images.save(kept)
    assert images.client.ttl(f"{KEY_PREFIX}{released.sha256}.png") > 500
    assert images.client.ttl(f"{KEY_PREFIX}{kept.sha256}.png") == -1
