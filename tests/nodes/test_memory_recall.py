from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.memory import InMemoryStore
from ragline.graph.context import RunContext
from ragline.graph.events import ResponseType
from ragline.graph.request import PipelineRequest
from ragline.graph.state import PipelineState, TurnIds
from ragline.memory.service import Caller, MemoryService
from ragline.memory.store import open_memory_store
from ragline.nodes.memory_recall import memory_recall

TURN = TurnIds("s", "r", "u", "a")


def _state(query: str) -> dict[str, Any]:
    return {"request": PipelineRequest(query=query), "turn": TURN}


async def _remember(store, caller: Caller, *texts: str) -> None:
    for text in texts:
        await MemoryService(store).add(caller, text)


async def test_memory_recall_puts_the_callers_relevant_memories_in_the_memory_prompt_and_emits_memory_recalled():
    store, seen = InMemoryStore(), []
    await _remember(store, Caller("default", "default"), "The user prefers answers in German.", "The user is allergic to peanuts.")
    await _remember(store, Caller("other", "default"), "The user prefers answers in French.")
    runtime = Runtime(context=RunContext(event_sink=seen.append), store=store)
    update = await memory_recall(_state("Which language should you answer in?"), runtime)
    assert "- The user prefers answers in German." in update["memory_prompt"]
    assert "French" not in update["memory_prompt"] and "peanuts" not in update["memory_prompt"]
    [event] = [e for e in seen if e.response_type == ResponseType.MEMORY_RECALLED]
    assert event.id == "r" and [m["content"] for m in event.data["memories"]] == ["The user prefers answers in German."]


async def test_memory_recall_reads_only_the_run_tenants_memories():
    store = InMemoryStore()
    await _remember(store, Caller("acme", "default"), "The user prefers answers in German.")
    globex = Runtime(context=RunContext(tenant_id="globex"), store=store)
    acme = Runtime(context=RunContext(tenant_id="acme"), store=store)
    assert await memory_recall(_state("Which language should you answer in?"), globex) == {}
    assert "German" in (await memory_recall(_state("Which language should you answer in?"), acme))["memory_prompt"]


async def test_nothing_relevant_means_no_memory_prompt_and_no_event():
    store, seen = InMemoryStore(), []
    await _remember(store, Caller(), "The user prefers answers in German.")
    update = await memory_recall(_state("What's the capital of France?"), Runtime(context=RunContext(event_sink=seen.append), store=store))
    assert update == {} and seen == []


async def test_without_a_store_memory_recall_does_nothing():
    assert await memory_recall(_state("Which language?"), Runtime(context=RunContext())) == {}


async def test_a_failing_store_never_stops_the_answer(tmp_path):
    store = open_memory_store("sqlite", tmp_path / "memory.sqlite")
    await _remember(store, Caller(), "The user prefers answers in German.")
    store.close()  # every query now fails
    assert await memory_recall(_state("Which language should you answer in?"), Runtime(context=RunContext(), store=store)) == {}


async def test_a_compiled_graph_hands_its_store_to_memory_recall():
    store = InMemoryStore()
    await _remember(store, Caller(), "The user prefers answers in German.")
    builder = StateGraph(PipelineState, context_schema=RunContext)
    builder.add_node("memory_recall", memory_recall)
    builder.add_edge(START, "memory_recall")
    builder.add_edge("memory_recall", END)
    graph = builder.compile(store=store)
    result = await graph.ainvoke(_state("Which language should you answer in?"), context=RunContext())
    assert "German" in result["memory_prompt"]
