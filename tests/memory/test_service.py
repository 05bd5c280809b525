from datetime import UTC

import pytest

from ragline.memory.service import Caller, MemoryService, render_memory_prompt
from ragline.memory.store import open_memory_store
from ragline.models.embeddings import Embedder

ALICE = Caller("acme", "alice@acme.example")
BOB = Caller("acme", "bob")
OTHER_TENANT_ALICE = Caller("globex", "alice@acme.example")
FACTS = ["The user's name is Alice.", "The user prefers answers in German.",
         "The user works on a Rust project called Ferris.", "The user is allergic to peanuts."]


async def test_memories_are_added_and_listed_per_caller_newest_first(store):
    service = MemoryService(store)
    first = await service.add(ALICE, "The user's name is Alice.", {"source": "chat"})
    second = await service.add(ALICE, "  The user prefers answers in German. ")
    await service.add(BOB, "The user's name is Bob.")
    listed = await service.list(ALICE)
    assert [m.id for m in listed] == [second.id, first.id]
    assert listed[0].text == "The user prefers answers in German." and listed[1].metadata == {"source": "chat"}
    assert [m.text for m in await service.list(BOB)] == ["The user's name is Bob."]
    assert await service.list(OTHER_TENANT_ALICE) == []


async def test_deleting_a_memory_removes_it_for_its_caller_only(store):
    service = MemoryService(store)
    memory = await service.add(ALICE, "The user is allergic to peanuts.")
    assert await service.delete(BOB, memory.id) is False
    assert await service.delete(ALICE, memory.id) is True
    assert await service.list(ALICE) == []


async def test_an_empty_memory_is_refused(store):
    with pytest.raises(ValueError):
        await MemoryService(store).add(ALICE, "   ")


async def test_recall_ranks_the_callers_memories_by_similarity_to_the_question(store, embedder):
    service = MemoryService(store, embedder)
    for fact in FACTS:
        await service.add(ALICE, fact)
    await service.add(BOB, "The user prefers answers in French.")
    recalled = await service.search(ALICE, "Which language should you answer in?", min_score=0.78, margin=0.05)
    assert [m.text for m in recalled] == ["The user prefers answers in German."]
    assert recalled[0].score > 0.78
    above_floor = await service.search(ALICE, "Which language should you answer in?", min_score=0.78)
    assert len(above_floor) > 1  # without the margin, a loosely related memory comes along
    everything = await service.search(ALICE, "Which language should you answer in?", limit=10)
    assert len(everything) == 4 and everything[0].text == "The user prefers answers in German."


async def test_recall_returns_nothing_when_no_memory_is_close_enough(store, embedder):
    service = MemoryService(store, embedder)
    for fact in FACTS:
        await service.add(ALICE, fact)
    assert await service.search(ALICE, "What's the capital of France?", min_score=0.78) == []


async def test_recall_without_an_embedder_ranks_by_shared_words(store):
    service = MemoryService(store)
    for fact in FACTS:
        await service.add(ALICE, fact)
    recalled = await service.search(ALICE, "Is the Rust project Ferris finished?")
    assert [m.text for m in recalled] == ["The user works on a Rust project called Ferris."]


async def test_recall_falls_back_to_shared_words_when_the_embedder_fails(store):
    broken = Embedder(model="openai/text-embedding-3-small", api_base="http://127.0.0.1:9/v1", api_key="x")
    service = MemoryService(store, broken)
    await service.add(ALICE, "The user is allergic to peanuts.")
    recalled = await service.search(ALICE, "peanuts in this sauce?", min_score=0.99)
    assert [m.text for m in recalled] == ["The user is allergic to peanuts."]


async def test_sqlite_memories_survive_reopening_the_store(tmp_path):
    path = tmp_path / "memory.sqlite"
    first = open_memory_store("sqlite", path)
    await MemoryService(first).add(ALICE, "The user's name is Alice.")
    first.close()
    again = open_memory_store("sqlite", path)
    assert [m.text for m in await MemoryService(again).list(ALICE)] == ["The user's name is Alice."]
    again.close()


def test_the_memory_prompt_lists_the_recalled_memories():
    assert render_memory_prompt([]) == ""
    from datetime import datetime

    from ragline.memory.service import Memory
    prompt = render_memory_prompt([Memory("1", "The user's name is Alice.", datetime.now(UTC))])
    assert prompt.endswith("\n- The user's name is Alice.")
