"""A session's thread: partial answers saved after a hard cancel, fork and rewind by checkpoint history."""

from __future__ import annotations

import asyncio
import threading

import pytest

from ragline.checkpoints.savers import memory_saver, redis_saver
from ragline.contracts.context import RunContext, RunHost
from ragline.contracts.request import PipelineRequest
from ragline.contracts.state import TurnIds
from ragline.graph.graphs import build_graph
from ragline.service import threads
from ragline.services import Services
from tests.scripted_model import Reply


@pytest.fixture(params=["memory", "redis"])
async def graph(request):
    if request.param == "memory":
        yield build_graph("ragline", checkpointer=memory_saver())
        return
    server = request.getfixturevalue("redis_server")
    server.flush()
    async with redis_saver(server.url) as saver:
        yield build_graph("ragline", checkpointer=saver)


async def turn(graph, session: str, n: int) -> None:
    context = RunContext(session_id=session, request_id=f"r{n}", user_message_id=f"u{n}", assistant_message_id=f"a{n}", host=RunHost(services=Services(), cancel_event=threading.Event()))  # as the service's runs have: the service saves a hard-cancelled answer itself
    request = PipelineRequest(query=f"question {n}", rewrite_enabled=False)
    async for _ in graph.astream({"request": request}, threads.thread_config(session), context=context, stream_mode="custom", durability="sync"):
        pass


async def ids(graph, session: str) -> list[str]:
    return [m.id for m in await threads.messages_of(graph, session)]


async def test_a_hard_cancelled_turn_is_settled_and_its_partial_answer_saved(graph, scripted_model):
    scripted_model.on(lambda b: True, Reply(chunks=["slow "] * 50, chunk_delay=0.05), times=1)
    task = asyncio.create_task(turn(graph, "s", 1))
    await asyncio.sleep(0.4)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await threads.snapshot(graph, "s")).next  # the interrupted node is still pending
    await threads.save_answer(graph, TurnIds("s", "r1", "u1", "a1"),
                              query="question 1", content="slow slow ", references=[], stopped=True)
    state = await threads.snapshot(graph, "s")
    assert state.next == ()
    assert [m.id for m in state.values["messages"]] == ["u1", "a1"]
    assert state.values["messages"][-1].additional_kwargs["stopped"] is True
    await turn(graph, "s", 2)  # the thread takes new turns afterwards
    assert await ids(graph, "s") == ["u1", "a1", "u2", "a2"]


async def test_rewind_returns_the_thread_to_the_checkpoint_that_ended_with_the_message(graph, scripted_model):
    for n in (1, 2, 3):
        await turn(graph, "s", n)
    await threads.remove_messages(graph, "s", ["u1"])
    earlier = await threads.find_snapshot(graph, "s", "a2")
    assert earlier is not None and [m.id for m in earlier.values["messages"]][-1] == "a2"
    await threads.restore(graph, "s", earlier)
    assert await ids(graph, "s") == ["u1", "a1", "u2", "a2"]  # the restored checkpoint predates the delete
    await turn(graph, "s", 4)
    assert await ids(graph, "s") == ["u1", "a1", "u2", "a2", "u4", "a4"]


async def test_edits_write_new_checkpoints_and_keep_the_history(graph, scripted_model):
    await turn(graph, "s", 1)
    before = len([s async for s in graph.aget_state_history(threads.thread_config("s"))])
    await threads.clear_messages(graph, "s")
    assert await ids(graph, "s") == []
    assert len([s async for s in graph.aget_state_history(threads.thread_config("s"))]) == before + 1


async def test_a_thread_at_rest_is_read_once_from_its_newest_checkpoint(graph, scripted_model, monkeypatch):
    scripted_model.on(lambda b: True, Reply(chunks=["An answer."]))
    await turn(graph, "s9", 1)
    pointer_reads: list[object] = []
    real = graph.aget_state
    monkeypatch.setattr(graph, "aget_state", lambda *a, **k: pointer_reads.append(a) or real(*a, **k))
    state = await threads.snapshot(graph, "s9")
    assert not state.next and [m.id for m in state.values["messages"]] == ["u1", "a1"]
    assert pointer_reads == []  # the history's newest checkpoint alone: one read of the thread, not two


async def test_an_edit_is_written_by_the_editor_not_by_a_pipeline_stage(graph, scripted_model):
    await turn(graph, "s", 1)
    await threads.remove_messages(graph, "s", ["a1"])
    state = await threads.snapshot(graph, "s")
    assert state.next == () and [m.id for m in state.values["messages"]] == ["u1"]
    written = await graph.checkpointer.aget_tuple(threads.thread_config("s"))
    assert written is not None and threads.EDIT in written.checkpoint["versions_seen"]  # the node that wrote the edit
    assert "fallback" not in written.checkpoint["versions_seen"]
    await turn(graph, "s", 2)  # the pipeline takes the edited thread as it is
    assert await ids(graph, "s") == ["u1", "u2", "a2"]
