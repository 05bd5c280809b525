from typing import Any

from langgraph.runtime import Runtime
from langgraph.store.memory import InMemoryStore

from ragline.contracts.context import RunContext, RunHost
from ragline.contracts.events import ResponseType
from ragline.contracts.request import PipelineRequest
from ragline.contracts.state import TurnIds
from ragline.memory.service import Caller, MemoryService
from ragline.memory.store import open_memory_store
from ragline.nodes.memory_recall import memory_recall
from ragline.services import Services

TURN = TurnIds("s", "r", "u", "a")
QUESTION = "Which language should you answer in?"


def _state(query: str) -> dict[str, Any]:
    return {"request": PipelineRequest(query=query), "turn": TURN}


def _runtime(store, embedder, event_sink=None, **context: Any) -> Runtime[RunContext]:
    services = Services(memory_store_factory=lambda: store, embedder_factory=lambda: embedder)
    return Runtime(context=RunContext(**context, host=RunHost(services=services, event_sink=event_sink)))


async def _remember(store, caller: Caller, *texts: str) -> None:
    for text in texts:
        await MemoryService(store).add(caller, text)


async def test_memory_recall_puts_the_callers_relevant_memories_in_the_memory_prompt_and_emits_memory_recalled(embedder):
    store, seen = InMemoryStore(), []
    await _remember(store, Caller("default", "default"), "The user prefers answers in German.", "The user is allergic to peanuts.")
    await _remember(store, Caller("other", "default"), "The user prefers answers in French.")
    update = await memory_recall(_state(QUESTION), _runtime(store, embedder, event_sink=seen.append))
    assert "- The user prefers answers in German." in update["memory_prompt"]
    assert "French" not in update["memory_prompt"] and "peanuts" not in update["memory_prompt"]
    [event] = [e for e in seen if e.response_type == ResponseType.MEMORY_RECALLED]
    assert event.id == "r" and [m["content"] for m in event.data["memories"]] == ["The user prefers answers in German."]


async def test_memory_recall_reads_only_the_run_tenants_memories(embedder):
    store = InMemoryStore()
    await _remember(store, Caller("acme", "default"), "The user prefers answers in German.")
    assert await memory_recall(_state(QUESTION), _runtime(store, embedder, tenant_id="globex")) == {}
    assert "German" in (await memory_recall(_state(QUESTION), _runtime(store, embedder, tenant_id="acme")))["memory_prompt"]


async def test_memory_recall_reads_only_the_run_users_memories(embedder):
    store = InMemoryStore()
    await _remember(store, Caller("acme", "ann"), "The user prefers answers in German.")
    assert await memory_recall(_state(QUESTION), _runtime(store, embedder, tenant_id="acme", user_id="bob")) == {}
    ann = await memory_recall(_state(QUESTION), _runtime(store, embedder, tenant_id="acme", user_id="ann"))
    assert "German" in ann["memory_prompt"]


async def test_nothing_relevant_means_no_memory_prompt_and_no_event(embedder):
    store, seen = InMemoryStore(), []
    await _remember(store, Caller(), "The user prefers answers in German.")
    update = await memory_recall(_state("What's the capital of France?"), _runtime(store, embedder, event_sink=seen.append))
    assert update == {} and seen == []


async def test_an_empty_store_recalls_nothing(embedder):
    assert await memory_recall(_state("Which language?"), _runtime(InMemoryStore(), embedder)) == {}


async def test_a_failing_store_never_stops_the_answer(tmp_path, embedder):
    store = open_memory_store("sqlite", tmp_path / "memory.sqlite")
    await _remember(store, Caller(), "The user prefers answers in German.")
    store.close()  # every query now fails
    assert await memory_recall(_state(QUESTION), _runtime(store, embedder)) == {}


async def test_only_the_first_recall_opens_the_memory_service_in_a_thread(embedder, thread_hops):
    """The first use opens stores (file I/O: off the event loop); later turns reach them directly."""
    runtime = _runtime(InMemoryStore(), embedder)
    await memory_recall(_state(QUESTION), runtime)
    assert len(thread_hops) == 1
    await memory_recall(_state(QUESTION), runtime)
    assert len(thread_hops) == 1
