"""memory/store.py: the SQLite store answers searches of empty namespaces without a thread hop,
and every other call as LangGraph's SqliteStore does."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

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


async def test_a_search_of_an_empty_namespace_answers_without_a_thread(store, hops):
    await store.aput(("ragline", "memories", "acme", "ann"), "m1", {"text": "tea"})
    await store.aput(("ragline", "memories", "acme", "an-x"), "m2", {"text": "tea"})
    hops.clear()
    assert await store.asearch(("ragline", "memories", "acme", "bob")) == []
    assert await store.asearch(("ragline", "memories", "acme", "an")) == []  # a prefix of a label is not the label
    assert hops == []


async def test_a_search_of_a_namespace_that_holds_items_finds_them_in_a_thread(store, hops):
    await store.aput(("ragline", "memories", "acme", "ann"), "m1", {"text": "tea"})
    await store.aput(("ragline", "memories", "acme", "ann", "deeper"), "m2", {"text": "coffee"})
    hops.clear()
    assert {item.key for item in await store.asearch(("ragline", "memories", "acme", "ann"))} == {"m1", "m2"}
    assert {item.key for item in await store.asearch(("ragline", "memories"))} == {"m1", "m2"}
    assert len(hops) == 2


async def test_a_store_busy_in_another_thread_is_searched_in_a_thread(store, hops):
    held, release = threading.Event(), threading.Event()

    def write_in_progress() -> None:  # a worker thread holds the connection: the loop must not wait for it
        with store.lock:
            held.set()
            release.wait(5)

    writer = threading.Thread(target=write_in_progress)
    writer.start()
    held.wait(5)
    search = asyncio.create_task(store.asearch(("ragline", "memories", "acme", "bob")))
    await asyncio.sleep(0.05)
    assert hops and not search.done()
    release.set()
    assert await search == [] and len(hops) == 1
    writer.join()


async def test_writes_and_reads_by_key_still_go_to_a_thread(store, hops):
    await store.aput(("ns",), "k", {"text": "x"})
    assert (await store.aget(("ns",), "k")).value == {"text": "x"}
    assert len(hops) == 2


labels = st.text(alphabet="ab._-/%*?[]é\U0010ffff", min_size=1, max_size=4).filter(lambda s: "." not in s)


@settings(max_examples=60, deadline=None)
@example(stored=[("a", "\U0010ffffb")], asked=["a"])  # past the highest character: still under the prefix
@given(stored=st.lists(st.tuples(labels, labels), max_size=4), asked=st.lists(labels, min_size=1, max_size=3))
def test_the_shortcut_never_hides_what_a_full_search_would_find(tmp_path_factory, stored, asked):
    """For any namespaces stored and any prefix asked: empty without the thread exactly when SqliteStore finds nothing."""
    store = ThreadedSqliteStore.open(tmp_path_factory.mktemp("store") / "memory.sqlite")
    try:
        for number, namespace in enumerate(stored):
            store.put(namespace, f"k{number}", {"n": number})
        expected = store.search(tuple(asked))
        assert asyncio.run(store.asearch(tuple(asked))) == expected
        if expected:
            assert store._holds_any(tuple(asked))
    finally:
        store.close()
