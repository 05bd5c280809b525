"""memory/store.py: the SQLite store answers every async call in a worker thread, as LangGraph's SqliteStore does synchronously."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragline.memory.store import ThreadedSqliteStore


@pytest.fixture
def store(tmp_path: Path):
    opened = ThreadedSqliteStore.open(tmp_path / "memory.sqlite")
    yield opened
    opened.close()


@pytest.fixture
def hops(thread_hops) -> list[object]:
    """The store calls that went to a worker thread."""
    return thread_hops


async def test_every_search_goes_to_a_thread_even_of_an_empty_namespace(store, hops):
    """The event loop never reads the file: `langgraph dev` rejects a blocking call, and a writer in
    another process can hold the file for as long as its transaction lasts."""
    await store.aput(("ragline", "memories", "acme", "ann"), "m1", {"text": "tea"})
    await store.aput(("ragline", "memories", "acme", "ann", "deeper"), "m2", {"text": "coffee"})
    hops.clear()
    assert await store.asearch(("ragline", "memories", "acme", "bob")) == []
    assert await store.asearch(("ragline", "memories", "acme", "an")) == []  # a prefix of a label is not the label
    assert {item.key for item in await store.asearch(("ragline", "memories", "acme", "ann"))} == {"m1", "m2"}
    assert {item.key for item in await store.asearch(("ragline", "memories"))} == {"m1", "m2"}
    assert len(hops) == 4


async def test_writes_and_reads_by_key_still_go_to_a_thread(store, hops):
    await store.aput(("ns",), "k", {"text": "x"})
    assert (await store.aget(("ns",), "k")).value == {"text": "x"}
    assert len(hops) == 2
