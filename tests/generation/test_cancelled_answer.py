"""A run cancelled by a host that cannot save its answer (langgraph dev's cancel, a parent's
timeout) keeps the partial answer, marked stopped; a host with a stop flag saves it itself."""

import asyncio
import threading

import pytest

from ragline.checkpoints.savers import memory_saver
from ragline.contracts.context import RunContext, RunHost
from ragline.graph.graphs import build_graph
from ragline.services import Services
from tests.scripted_model import Reply


async def _cancel_mid_answer(graph, config, context):
    async def run():
        async for _ in graph.astream({"messages": [("user", "hi")]}, config, stream_mode="custom", context=context):
            pass

    task = asyncio.create_task(run())
    await asyncio.sleep(1.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_cancelled_run_keeps_its_partial_answer(scripted_model):
    scripted_model.on(lambda b: True, Reply(chunks=[f"w{i} " for i in range(40)], chunk_delay=0.1))
    graph = build_graph("ragline_chat", checkpointer=memory_saver(), services=Services())
    config = {"configurable": {"thread_id": "cancelled-1"}}
    await _cancel_mid_answer(graph, config, None)
    values = (await graph.aget_state(config)).values
    answer = values["messages"][-1]
    assert answer.type == "ai" and answer.content.startswith("w0 w1") and len(answer.content.split()) < 40
    assert values["chat_response"].stopped and values["chat_response"].content == answer.content


async def test_a_host_with_a_stop_flag_gets_the_cancellation(scripted_model):
    scripted_model.on(lambda b: True, Reply(chunks=[f"w{i} " for i in range(40)], chunk_delay=0.1))
    graph = build_graph("ragline_chat", checkpointer=memory_saver(), services=Services())
    config = {"configurable": {"thread_id": "cancelled-2"}}
    await _cancel_mid_answer(graph, config, RunContext(host=RunHost(services=Services(), cancel_event=threading.Event())))
    values = (await graph.aget_state(config)).values
    assert values["messages"][-1].type == "human"  # the service saves what it showed, or hands the run over


async def test_a_run_stopped_before_its_answer_never_asks_the_model(scripted_model):
    """A stop is no edge of the graph: the run goes on until its host cancels it, and the answer
    stage checks the flag first, so a stop during search spends no prefill on the model."""
    scripted_model.on(lambda b: True, Reply.text("never sent"))
    stopped = threading.Event()
    stopped.set()
    graph = build_graph("ragline_chat", checkpointer=memory_saver(), services=Services())
    config = {"configurable": {"thread_id": "stopped-early"}}
    await graph.ainvoke({"messages": [("user", "hi")]}, config, context=RunContext(host=RunHost(services=Services(), cancel_event=stopped)))
    assert scripted_model.requests == []
    assert (await graph.aget_state(config)).values["chat_response"].stopped
