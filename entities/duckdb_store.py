"""The embedded graph store: DuckDB tables of nodes and relations in one file under the data dir.

Replaces the seed's Neo4j repository for single-machine use. DuckDB lets one process at a time
open a file, so a file-backed store opens it for each operation and closes it after: a second
process on the same data directory (the CLI beside `serve` or `langgraph dev`) waits its turn
for a moment instead of being locked out, and past the wait gets an error that says why. Matching is substring matching on
normalised names, in both directions (a node "Eiffel Tower" matches the query entity "the Eiffel
Tower in Paris" and the entity "Eiffel"); one-hop relations come with the matched nodes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from ragline import defaults
from ragline.entities.store import GraphStoreError, ThreadedGraphStore
from ragline.entities.types import (
    GraphMatch,
    GraphNode,
    GraphRelation,
    Namespace,
    normalize_name,
)

# No primary keys: DuckDB checks them eagerly inside a transaction, and a document's graph is
# replaced (delete + insert) in one; names are merged in Python before insert instead.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS graph_nodes (kb_id VARCHAR NOT NULL, knowledge_id VARCHAR NOT NULL, name VARCHAR NOT NULL,
    name_norm VARCHAR NOT NULL, type VARCHAR NOT NULL, description VARCHAR NOT NULL, chunk_ids VARCHAR[] NOT NULL);
CREATE TABLE IF NOT EXISTS graph_relations (kb_id VARCHAR NOT NULL, knowledge_id VARCHAR NOT NULL,
    source VARCHAR NOT NULL, target VARCHAR NOT NULL, source_norm VARCHAR NOT NULL, target_norm VARCHAR NOT NULL,
    relation VARCHAR NOT NULL, description VARCHAR NOT NULL, chunk_ids VARCHAR[] NOT NULL);
CREATE TABLE IF NOT EXISTS graph_kb_settings (kb_id VARCHAR NOT NULL, extraction_enabled BOOLEAN NOT NULL);
CREATE INDEX IF NOT EXISTS graph_nodes_by_kb ON graph_nodes (kb_id);
CREATE INDEX IF NOT EXISTS graph_relations_by_kb ON graph_relations (kb_id);
"""

# rank 0: same name; 1: the node name contains the entity; 2: the entity contains the node name.
# A node name must have 2+ characters to match by being contained, so "a" matches nothing.
_SEARCH_NODES = """
WITH terms AS (SELECT unnest($terms::VARCHAR[]) AS term),
hits AS (
    SELECT n.*, min(CASE WHEN n.name_norm = t.term THEN 0 WHEN contains(n.name_norm, t.term) THEN 1 ELSE 2 END) AS rank
    FROM graph_nodes n JOIN terms t
      ON contains(n.name_norm, t.term) OR (length(n.name_norm) >= 2 AND contains(t.term, n.name_norm))
    WHERE n.kb_id = $kb AND ($doc IS NULL OR n.knowledge_id = $doc)
    GROUP BY ALL
)
SELECT name, knowledge_id, type, description, chunk_ids FROM hits
ORDER BY rank, len(chunk_ids) DESC, name_norm, knowledge_id
LIMIT $limit
"""

_SEARCH_RELATIONS = """
SELECT source, target, relation, knowledge_id, description, chunk_ids FROM graph_relations
WHERE kb_id = $kb AND list_contains($docs::VARCHAR[], knowledge_id)
  AND (list_contains($names::VARCHAR[], knowledge_id || '/' || source_norm)
       OR list_contains($names::VARCHAR[], knowledge_id || '/' || target_norm))
ORDER BY knowledge_id, source_norm, target_norm, relation
LIMIT $limit
"""


class DuckDBGraphStore(ThreadedGraphStore):
    def __init__(self, path: Path | str) -> None:
        super().__init__()
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._memory = duckdb.connect(":memory:") if str(path) == ":memory:" else None
        with self._connected() as db:
            db.execute(_SCHEMA)

    @contextmanager
    def _connected(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The database for one operation: the in-memory one, or the file opened (and closed after)."""
        if self._memory is not None:
            yield self._memory
            return
        db = _open_waiting(Path(self.path), defaults.ENTITY_GRAPH_LOCK_WAIT_S)
        try:
            yield db
        finally:
            db.close()

    def replace_document_sync(self, knowledge_base_id: str, knowledge_id: str,
                              nodes: list[GraphNode], relations: list[GraphRelation]) -> None:
        with self._connected() as db:
            self._replace(db, knowledge_base_id, knowledge_id, nodes, relations)

    def _replace(self, db: duckdb.DuckDBPyConnection, knowledge_base_id: str, knowledge_id: str,
                 nodes: list[GraphNode], relations: list[GraphRelation]) -> None:
        db.execute("BEGIN TRANSACTION")
        try:
            _delete(db, knowledge_base_id, knowledge_id)
            if nodes:
                db.executemany(
                    "INSERT INTO graph_nodes VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [(knowledge_base_id, knowledge_id, n.name, n.key, n.type, n.description, n.chunk_ids) for n in nodes],
                )
            if relations:
                db.executemany(
                    "INSERT INTO graph_relations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(knowledge_base_id, knowledge_id, r.source, r.target, normalize_name(r.source), normalize_name(r.target),
                      r.relation, r.description, r.chunk_ids) for r in relations],
                )
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def delete_document_sync(self, knowledge_base_id: str, knowledge_id: str) -> None:
        with self._connected() as db:
            _delete(db, knowledge_base_id, knowledge_id)

    def delete_knowledge_base_sync(self, knowledge_base_id: str) -> None:
        with self._connected() as db:
            for table in ("graph_nodes", "graph_relations", "graph_kb_settings"):
                db.execute(f"DELETE FROM {table} WHERE kb_id = ?", (knowledge_base_id,))

    def search_namespace_sync(self, namespace: Namespace, terms: list[str], node_limit: int, relation_limit: int) -> GraphMatch:
        with self._connected() as db:
            return _search_namespace(db, namespace, terms, node_limit, relation_limit)

    def set_extraction_enabled_sync(self, knowledge_base_id: str, enabled: bool) -> None:
        with self._connected() as db:
            db.execute("DELETE FROM graph_kb_settings WHERE kb_id = ?", (knowledge_base_id,))
            db.execute("INSERT INTO graph_kb_settings VALUES (?, ?)", (knowledge_base_id, enabled))

    def extraction_enabled_sync(self, knowledge_base_ids: list[str]) -> set[str]:
        with self._connected() as db:
            rows = db.execute(
                "SELECT kb_id FROM graph_kb_settings WHERE extraction_enabled AND list_contains(?::VARCHAR[], kb_id)",
                (knowledge_base_ids,),
            ).fetchall()
        return {row[0] for row in rows}

    def close_sync(self) -> None:
        if self._memory is not None:
            self._memory.close()

    async def close(self) -> None:
        await self._run(self.close_sync)


def _delete(db: duckdb.DuckDBPyConnection, knowledge_base_id: str, knowledge_id: str) -> None:
    for table in ("graph_nodes", "graph_relations"):
        db.execute(f"DELETE FROM {table} WHERE kb_id = ? AND knowledge_id = ?", (knowledge_base_id, knowledge_id))


def _search_namespace(db: duckdb.DuckDBPyConnection, namespace: Namespace, terms: list[str],
                      node_limit: int, relation_limit: int) -> GraphMatch:
    kb = namespace.knowledge_base_id
    rows = db.execute(_SEARCH_NODES, {"terms": terms, "kb": kb, "doc": namespace.knowledge_id, "limit": node_limit}).fetchall()
    nodes = [GraphNode(name, kb, doc, type_, description, list(chunks)) for name, doc, type_, description, chunks in rows]
    if not nodes:
        return GraphMatch()
    params = {"kb": kb, "docs": sorted({n.knowledge_id for n in nodes}),
              "names": [f"{n.knowledge_id}/{n.key}" for n in nodes], "limit": relation_limit}
    relations = [
        GraphRelation(source, target, relation, kb, doc, description, list(chunks))
        for source, target, relation, doc, description, chunks in db.execute(_SEARCH_RELATIONS, params).fetchall()
    ]
    return GraphMatch(nodes, relations)


def _open_waiting(path: Path, wait_s: float) -> duckdb.DuckDBPyConnection:
    """Open the file, sleeping while another process holds it, for at most `wait_s` seconds."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return duckdb.connect(str(path))
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower():
                raise
            if time.monotonic() >= deadline:
                raise GraphStoreError(
                    f"the entity graph {path} is held by another process for more than {wait_s:g} s "
                    "(another ragline on the same data directory, or a tool with the file open)"
                ) from exc
            time.sleep(0.05)
