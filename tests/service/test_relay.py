"""service/relay.py: a run's stage events into the in-process log, admitted by the run as the driver's path admits them."""

from __future__ import annotations

import asyncio
import threading

import pytest

from ragline.checkpoints.redis_streams import RedisStreamManager
from ragline.checkpoints.streams import MemoryStreamManager, StreamManager
from ragline.contracts import events
from ragline.contracts.context import RunContext, RunHost
from ragline.contracts.events import ProgressWindow
from ragline.contracts.request import PipelineRequest
from ragline.contracts.state import TurnIds
from ragline.graph.turn import TurnDriver
from ragline.service.registry import RunRecord
from ragline.service.relay import Run, StageEvents
from ragline.service.start_slots import StartSlots

TURN = TurnIds("s", "r", "u", "a")


def _relay(streams: StreamManager | None = None) -> tuple[StageEvents, StreamManager, Run]:
    """A relay for a run as service/runs.py makes it (its driver only tracks events here: no graph)."""
    context = RunContext(session_id="s", request_id="r", user_message_id="u", assistant_message_id="a", host=RunHost(cancel_event=threading.Event()))
    record = RunRecord("s", "r", "u", "a", tenant_id="t", owner_id="o", request_json="{}", query="q")
    run = Run(record, TurnDriver(None, context), PipelineRequest(query="q"))  # type: ignore[arg-type]
    streams = streams or MemoryStreamManager()
    return StageEvents(streams, run), streams, run


async def test_events_are_in_the_log_the_moment_a_stage_emits_them(streams):
    """In process they are there at once; on Redis, once `delivered` says so (they went out in the next batch)."""
    relay, streams, run = _relay(streams)
    relay(events.answer(TURN, "Par"))
    relay({"response_type": "answer", "content": "is", "session_id": "s"})  # an already JSON-ready event goes as it is
    await relay.delivered()
    logged = [entry.event for entry in await streams.read("s", "a")]
    assert [e["content"] for e in logged] == ["Par", "is"] and logged[0]["response_type"] == "answer"
    assert run.transcript.answer == "Paris"


async def test_what_the_run_does_not_admit_never_reaches_the_log(streams):
    relay, streams, run = _relay(streams)
    relay(events.answer(TURN, "before the stop"))
    run.driver.context.host.cancel_event.set()
    relay(events.answer(TURN, " after it"))
    await relay.delivered()
    assert [entry.event["content"] for entry in await streams.read("s", "a")] == ["before the stop"]
    assert run.transcript.answer == "before the stop"


async def test_a_stage_event_the_redis_log_refused_fails_the_run_when_it_asks(redis):
    streams = RedisStreamManager(redis)
    relay, _, _ = _relay(streams)
    relay(events.answer(TURN, "fine"))
    await relay.delivered()
    await redis.set(streams.key("s", "a"), "not a stream")  # the next append is refused
    relay(events.answer(TURN, " lost"))
    relay(events.answer(TURN, " also lost"))
    with pytest.raises(Exception, match="WRONGTYPE"):
        await relay.delivered()
    await streams.aclose()


async def test_the_driver_learns_of_failures_and_open_cards_from_relayed_events():
    relay, _, run = _relay()
    relay(events.tool_call(TURN, ProgressWindow.KNOWLEDGE_SEARCH))
    relay(events.error(TURN, "the model failed", code="model_call"))
    closing = run.driver.closing()
    assert run.driver.failed
    assert [e.response_type for e in closing] == ["tool_result", "complete"]  # the open card is closed as failed


async def test_the_answers_first_text_frees_the_runs_start_slot_and_nothing_before_it_does():
    relay, _, run = _relay()
    slots = StartSlots(1, hold_s=30)
    run.start_slot = await slots.take()
    relay(events.agent_query(TURN, "q"))
    relay(events.references(TURN, []))
    assert run.start_slot.held
    relay(events.thinking(TURN, "Hm"))
    assert not run.start_slot.held
    await asyncio.wait_for(slots.take(), 1)


async def test_a_stage_event_refused_for_a_lost_lease_ends_this_copy_of_the_run(redis):
    """Another replica took the run over while this one's loop stalled: nothing more of it reaches the log."""
    from ragline.checkpoints.streams import Fence, FenceLost

    streams = RedisStreamManager(redis)
    relay, _, run = _relay(streams)
    run.fence = Fence("lease:a", "run:a", "A", 5_000)
    await redis.set("run:a", "{}")
    await redis.set("lease:a", "A")
    run.task = asyncio.create_task(asyncio.sleep(30))
    relay(events.answer(TURN, "mine"))
    await relay.delivered()
    await redis.set("lease:a", "B")
    relay(events.answer(TURN, " theirs"))
    with pytest.raises(FenceLost):
        await relay.delivered()
    await asyncio.sleep(0)
    assert run.lease_lost and run.task.cancelled()
    assert [entry.event["content"] for entry in await streams.read("s", "a")] == ["mine"]
    await streams.aclose()
