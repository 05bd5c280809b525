"""The entity graph in a shared deployment (issue 12): with RAGLINE_REDIS_URL set the graph lives on
the Bolt server when one is configured (FalkorDB here), and without one there is no graph at all
rather than a DuckDB file on one replica's disk: enabling extraction is refused with a message
naming RAGLINE_GRAPH_BOLT_URL, documents still index, entity search finds nothing to do."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from ragline.entities.neo4j_store import Neo4jGraphStore
from ragline.entities.store import GraphUnavailableError, UnavailableGraphStore, open_graph_store
from ragline.entities.types import GraphNode, Namespace
from ragline.models.embeddings import Embedder
from ragline.services import Services
from ragline.settings import Settings
from tests.redis_server import RedisServer
from tests.test_cli import _ragline


def shared_settings(redis: RedisServer, data_dir: Path, **overrides: object) -> Settings:
    return Settings(**{"redis_url": redis.url, "data_dir": data_dir, "graph_bolt_url": None, **overrides})  # type: ignore[arg-type]


async def test_shared_mode_without_a_bolt_url_has_no_graph_and_says_what_to_set(redis_server, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="ragline.entities.store"):
        store = open_graph_store(shared_settings(redis_server, tmp_path))
    assert isinstance(store, UnavailableGraphStore)
    assert "RAGLINE_GRAPH_BOLT_URL" in caplog.text and "skipped" in caplog.text  # said once, when the graph is opened
    with pytest.raises(GraphUnavailableError, match="RAGLINE_GRAPH_BOLT_URL"):
        await store.set_extraction_enabled("kb1", True)
    with pytest.raises(GraphUnavailableError, match="RAGLINE_GRAPH_BOLT_URL"):
        await store.replace_document("kb1", "doc1", [GraphNode("Eiffel Tower", "kb1", "doc1")], [])
    await store.set_extraction_enabled("kb1", False)  # turning it off is what it already is
    await store.delete_knowledge_base("kb1")  # deleting a base never fails on the graph
    assert await store.extraction_enabled(["kb1"]) == set()
    assert (await store.search([Namespace("kb1")], ["Eiffel Tower"])).nodes == []
    assert list(tmp_path.rglob("graph.duckdb*")) == []


async def test_shared_mode_indexes_documents_without_a_graph_file(redis_server, tmp_path, embedder: Embedder):
    redis_server.flush()
    services = Services(shared_settings(redis_server, tmp_path), embedder_factory=lambda: embedder)
    try:
        kb = services.retrieval.knowledge_bases.create("shared-graphless")
        knowledge = await services.ingestion.ingest_text(kb.id, "Gustave Eiffel built the Eiffel Tower in Paris.", title="Tower")
        assert knowledge.chunk_count >= 1 and services.is_open("graph_store")  # the graph step asked, and was told no
        assert await services.graph_store.extraction_enabled([kb.id]) == set()
    finally:
        await services.aclose()
    assert list(tmp_path.rglob("graph.duckdb*")) == []


async def test_shared_mode_with_a_bolt_url_keeps_the_graph_on_the_bolt_server(redis_server, falkordb, tmp_path, kb_id):
    store = open_graph_store(shared_settings(redis_server, tmp_path, graph_bolt_url=falkordb.bolt_url))
    assert isinstance(store, Neo4jGraphStore) and store.unavailable_reason is None
    await store.set_extraction_enabled(kb_id, True)
    assert await store.extraction_enabled([kb_id]) == {kb_id}
    await store.delete_knowledge_base(kb_id)
    assert list(tmp_path.rglob("graph.duckdb*")) == []


def test_kb_create_with_graph_in_shared_mode_without_bolt_is_refused_before_the_base_exists(redis_server, tmp_path):
    redis_server.flush()
    env = {"RAGLINE_REDIS_URL": redis_server.url, "RAGLINE_DATA_DIR": str(tmp_path), "RAGLINE_GRAPH_BOLT_URL": ""}
    refused = _ragline("kb", "create", "graphy", "--graph", env_extra=env)
    assert refused.returncode == 1 and "RAGLINE_GRAPH_BOLT_URL" in refused.stderr, refused.stderr
    listed = _ragline("kb", "list", env_extra=env)
    assert listed.returncode == 0 and listed.stdout.strip() == "no knowledge bases", listed.stdout + listed.stderr
    assert list(tmp_path.rglob("graph.duckdb*")) == []
