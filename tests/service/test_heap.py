"""The server keeps full garbage collections short: startup and its first idle moment freeze the heap."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import httpx
import pytest

from ragline.api.app import create_app
from ragline.service.heap import HeapFreezer, freeze
from tests.api.live import ThreadServer, collect, memory_settings, new_session


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # the rest of the test session collects as usual


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_freezing_collects_garbage_cycles_first_so_none_is_kept_for_ever():
    cycle = _Cycle()
    gone = weakref.ref(cycle)
    del cycle
    freeze()
    assert gone() is None
    assert gc.get_freeze_count() > 0


def test_startup_freezes_and_only_the_first_idle_moments_freeze_again():
    freezer = HeapFreezer(idle_freezes=1)
    freezer.startup()
    assert gc.get_freeze_count() > 0
    gc.unfreeze()
    freezer.idle()
    assert gc.get_freeze_count() > 0
    gc.unfreeze()
    freezer.idle()  # later idle moments leave the collector alone: frozen cycles would never be freed
    assert gc.get_freeze_count() == 0


async def test_the_service_freezes_at_startup_and_after_its_first_answer(scripted_server):
    live = ThreadServer(create_app(memory_settings(scripted_server))).start()
    try:
        assert gc.get_freeze_count() > 0
        gc.unfreeze()
        async with httpx.AsyncClient(base_url=live.url, timeout=30) as client:
            sid = await new_session(client, title="t")
            got = await collect(client, "POST", f"/api/v1/sessions/{sid}/chat", json={"query": "hi", "rewrite_enabled": False})
        assert got[-1].type == "complete"
        for _ in range(500):  # the run freezes right after its `complete` went out
            if gc.get_freeze_count() > 0:
                break
            await asyncio.sleep(0.01)
        assert gc.get_freeze_count() > 0
    finally:
        live.stop()
