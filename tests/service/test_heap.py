"""The server keeps full garbage collections short: startup and its first idle moment freeze the heap."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import httpx
import pytest

from ragline import defaults
from ragline.api.app import create_app
from ragline.service.heap import HeapFreezer, freeze
from tests.api.live import ThreadServer, collect, memory_settings, new_session


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    thresholds = gc.get_threshold()
    gc.unfreeze()
    yield
    gc.unfreeze()  # the rest of the test session collects as usual
    gc.set_threshold(*thresholds)


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


def test_startup_raises_the_young_generation_threshold_so_full_collections_stay_rare():
    gc.set_threshold(700, 10, 10)  # CPython's own
    HeapFreezer().startup()
    assert gc.get_threshold() == defaults.GC_THRESHOLDS
    assert defaults.GC_THRESHOLDS[0] >= 10_000  # a run's short-lived objects die before a collection sees them


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
