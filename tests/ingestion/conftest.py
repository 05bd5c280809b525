"""Fixtures of the ingestion tests: wiki replicas, Services that share one real Redis (issue 12)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from ragline.services import Services
from tests.api.live import memory_settings
from tests.redis_server import RedisServer
from tests.scripted_model import ScriptedModel


@pytest.fixture
async def wiki_replicas(redis_server: RedisServer, scripted_model: ScriptedModel, embedder, tmp_path: Path) -> AsyncIterator[Callable[[str], Services]]:
    """`replica(name)`: Services with their own data directory on a flushed shared Redis, the
    scripted chat model writing the pages; all closed after the test."""
    redis_server.flush()
    made: list[Services] = []

    def replica(name: str) -> Services:
        settings = memory_settings(scripted_model, data_dir=tmp_path / name, redis_url=redis_server.url)
        made.append(Services(settings, embedder_factory=lambda: embedder))
        return made[-1]

    yield replica
    for services in made:
        await services.aclose()
