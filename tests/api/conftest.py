"""Fixtures: the app under uvicorn in a thread (in-memory backend) and clients for it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from ragline.api.app import create_app
from tests.api.live import ThreadServer, memory_settings


@pytest.fixture(scope="module")
def server(scripted_server) -> Iterator[ThreadServer]:
    """One in-process service per test module; tests isolate themselves with new sessions."""
    live = ThreadServer(create_app(memory_settings(scripted_server))).start()
    yield live
    live.stop()


@pytest.fixture
async def client(server: ThreadServer, scripted_model) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        yield http



