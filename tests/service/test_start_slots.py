"""service/start_slots.py: a burst of turns starts a few at a time; a turn holds its slot until its
answer streams, its run ends, or hold_s passes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from ragline.api.app import create_app
from ragline.service.start_slots import StartSlots
from tests.api.live import ThreadServer, answer_of, collect, memory_settings, new_session
from tests.scripted_model import Reply, last_user_text


async def test_no_more_turns_than_slots_start_at_once_and_the_rest_wait_in_order():
    slots = StartSlots(2, hold_s=30)
    first, second = await slots.take(), await slots.take()
    started: list[str] = []

    async def turn(name: str) -> None:
        slot = await slots.take()
        started.append(name)
        slot.free()

    waiting = [asyncio.create_task(turn(name)) for name in ("c", "d", "e")]
    await asyncio.sleep(0.05)
    assert started == [] and slots.waiting == 3
    first.free()
    await asyncio.sleep(0.05)
    assert started == ["c", "d", "e"]  # one slot, freed by each in turn, in the order they asked
    second.free()
    await asyncio.gather(*waiting)
    assert slots.waiting == 0


async def test_a_slot_frees_itself_after_hold_s():
    slots = StartSlots(1, hold_s=0.1)
    held = await slots.take()
    began = time.monotonic()
    await asyncio.wait_for(slots.take(), 2)
    assert 0.08 <= time.monotonic() - began < 1.0
    assert not held.held


async def test_freeing_a_slot_twice_frees_it_once():
    slots = StartSlots(1, hold_s=30)
    slot = await slots.take()
    slot.free()
    slot.free()
    await slots.take()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(slots.take(), 0.1)  # one slot, taken: a second free would have made two


async def test_a_turn_cancelled_while_it_waits_takes_no_slot_with_it():
    slots = StartSlots(1, hold_s=30)
    held = await slots.take()
    waiter = asyncio.create_task(slots.take())
    await asyncio.sleep(0.02)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert slots.waiting == 0
    held.free()
    await asyncio.wait_for(slots.take(), 1)


async def test_no_slots_means_no_limit():
    slots = StartSlots(0, hold_s=30)
    taken = [await asyncio.wait_for(slots.take(), 1) for _ in range(100)]
    assert not any(slot.held for slot in taken)


# --- in the service: the second of two turns reaches the model when the first one's answer streams ---


def _arrivals(scripted_model: Any) -> tuple[dict[str, float], Callable[[str], Callable[[dict[str, Any]], bool]]]:
    arrived: dict[str, float] = {}

    def asked(word: str) -> Callable[[dict[str, Any]], bool]:
        def predicate(body: dict[str, Any]) -> bool:
            if word not in last_user_text(body):
                return False
            arrived.setdefault(word, time.monotonic())  # the model saw the turn's request now
            return True

        return predicate

    return arrived, asked


async def _waiting_to_start(client: httpx.AsyncClient) -> float:
    metrics = (await client.get("/metrics")).text
    return next(float(line.split()[-1]) for line in metrics.splitlines() if line.startswith("ragline_runs_waiting_to_start "))


async def _two_turns(scripted_model: Any, *, shows_waiting: bool = False, **settings: Any) -> float:
    """Seconds between the model's request of the first turn and that of the second, started just after
    (with `shows_waiting`, /metrics counts the second as waiting for a slot meanwhile)."""
    arrived, asked = _arrivals(scripted_model)
    # The first turn's answer starts 0.8 s after its request and ends about 1.5 s after that.
    scripted_model.on(asked("first"), Reply(chunks=["A1", " A2", " A3", " A4"], first_delay=0.8, chunk_delay=0.5))
    scripted_model.on(asked("second"), Reply.text("B"))
    live = ThreadServer(create_app(memory_settings(scripted_model, **settings))).start()
    try:
        async with httpx.AsyncClient(base_url=live.url, timeout=30) as client:
            one, two = await new_session(client, title="one"), await new_session(client, title="two")
            body = {"rewrite_enabled": False}
            first = asyncio.create_task(collect(client, "POST", f"/api/v1/sessions/{one}/chat", json={"query": "first", **body}))
            while "first" not in arrived:
                await asyncio.sleep(0.01)
            asking = asyncio.create_task(collect(client, "POST", f"/api/v1/sessions/{two}/chat", json={"query": "second", **body}))
            if shows_waiting:
                for _ in range(100):
                    if await _waiting_to_start(client) == 1:
                        break
                    await asyncio.sleep(0.02)
                assert await _waiting_to_start(client) == 1 and "second" not in arrived
            second = await asking
            assert answer_of(await first) == "A1 A2 A3 A4" and answer_of(second) == "B"
            assert await _waiting_to_start(client) == 0
    finally:
        live.stop()
    return arrived["second"] - arrived["first"]


async def test_a_turn_starts_once_the_turn_holding_the_only_slot_streams_its_answer(scripted_model):
    waited = await _two_turns(scripted_model, shows_waiting=True, run_start_slots=1, run_start_hold_s=30)
    assert 0.7 <= waited < 1.8  # after the first's answer began (0.8 s), long before its run ended (2.3 s)


async def test_a_turn_waiting_on_its_model_frees_its_slot_after_hold_s(scripted_model):
    waited = await _two_turns(scripted_model, run_start_slots=1, run_start_hold_s=0.2)
    assert 0.15 <= waited < 0.7  # the first turn still waited for its model's first token


async def test_a_turn_that_fails_before_its_answer_frees_its_slot_when_its_run_ends(scripted_model):
    arrived, asked = _arrivals(scripted_model)
    scripted_model.on(asked("first"), Reply(status=500, error="scripted outage"))
    scripted_model.on(asked("second"), Reply.text("B"))
    live = ThreadServer(create_app(memory_settings(scripted_model, run_start_slots=1, run_start_hold_s=30))).start()
    try:
        async with httpx.AsyncClient(base_url=live.url, timeout=60) as client:
            one, two = await new_session(client, title="one"), await new_session(client, title="two")
            failed = await collect(client, "POST", f"/api/v1/sessions/{one}/chat", json={"query": "first", "rewrite_enabled": False})
            assert "error" in [frame.type for frame in failed]
            began = time.monotonic()
            second = await collect(client, "POST", f"/api/v1/sessions/{two}/chat", json={"query": "second", "rewrite_enabled": False})
            assert answer_of(second) == "B" and time.monotonic() - began < 10  # not the first turn's 30 s hold
    finally:
        live.stop()
