"""The DuckDB graph file shared by two processes on one data directory (CLI beside serve)."""

import subprocess
import sys
import textwrap
import time

import pytest

from ragline import defaults
from ragline.entities.duckdb_store import DuckDBGraphStore
from ragline.entities.store import GraphStoreError
from ragline.entities.types import GraphNode, Namespace


def _python(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE, text=True)


def _holding(path, seconds: float) -> subprocess.Popen:
    """A process that keeps the file open, as an older ragline did for its whole life."""
    process = _python(f"""
        import time, duckdb
        db = duckdb.connect({str(path)!r})
        print("open", flush=True)
        time.sleep({seconds})
    """)
    assert process.stdout.readline().strip() == "open"
    return process


async def test_two_processes_on_one_file_both_read_and_write_the_graph(tmp_path):
    path = tmp_path / "graph.duckdb"
    store = DuckDBGraphStore(path)  # open in this process, as serve keeps its store
    await store.replace_document("kb", "d1", [GraphNode("Eiffel Tower", "kb", "d1", "", "", ["c1"])], [])
    other = _python(f"""
        import asyncio
        from ragline.entities.duckdb_store import DuckDBGraphStore
        from ragline.entities.types import GraphNode, Namespace
        async def main():
            store = DuckDBGraphStore({str(path)!r})
            seen = await store.search([Namespace("kb")], ["eiffel"])
            await store.replace_document("kb", "d2", [GraphNode("Paris", "kb", "d2", "", "", ["c2"])], [])
            print(",".join(n.name for n in seen.nodes), flush=True)
        asyncio.run(main())
    """)
    out, _ = other.communicate(timeout=60)
    assert other.returncode == 0 and out.strip() == "Eiffel Tower"
    match = await store.search([Namespace("kb")], ["paris"])
    assert [n.name for n in match.nodes] == ["Paris"]
    await store.close()


async def test_a_store_waits_for_a_process_that_holds_the_file_briefly(tmp_path):
    path = tmp_path / "graph.duckdb"
    store = DuckDBGraphStore(path)
    holder = _holding(path, 1.0)
    try:
        started = time.monotonic()
        await store.set_extraction_enabled("kb", True)
        assert time.monotonic() - started > 0.3  # it waited for the holder, and then wrote
        assert await store.extraction_enabled(["kb"]) == {"kb"}
    finally:
        holder.wait(timeout=30)


async def test_a_file_held_past_the_wait_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(defaults, "ENTITY_GRAPH_LOCK_WAIT_S", 0.5)
    path = tmp_path / "graph.duckdb"
    store = DuckDBGraphStore(path)
    holder = _holding(path, 30)
    try:
        with pytest.raises(GraphStoreError, match="held by another process for more than 0.5 s"):
            await store.search([Namespace("kb")], ["eiffel"])
    finally:
        holder.kill()
        holder.wait()
    assert (await store.search([Namespace("kb")], ["eiffel"])).nodes == []  # and works once it is free
