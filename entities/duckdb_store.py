"""The embedded graph store: DuckDB tables of nodes and relations in one file under the data dir.

Replaces the seed's Neo4j repository for single-machine use. Matching is substring matching on
normalised names, in both directions (a node "Eiffel Tower" matches the query entity "the Eiffel
Tower in Paris" and the entity "Eiffel"); one-hop relations come with the matched nodes.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from ragline.entities.store import ThreadedGraphStore
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
        self._db = duckdb.connect(str(path))
        self._db.execute(_SCHEMA)

    def replace_document_sync(self, knowledge_base_id: str, knowledge_id: str,
                              nodes: list[GraphNode], relations: list[GraphRelation]) -> None:
        db = self._db
        db.execute("BEGIN TRANSACTION")
        try:
            self._delete(knowledge_base_id, knowledge_id)
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

    def _delete(self, knowledge_base_id: str, knowledge_id: str) -> None:
        for table in ("graph_nodes", "graph_relations"):
            self._db.execute(f"DELETE FROM {table} WHERE kb_id = ? AND knowledge_id = ?", (knowledge_base_id, knowledge_id))

    def delete_document_sync(self, knowledge_base_id: str, knowledge_id: str) -> None:
        self._delete(knowledge_base_id, knowledge_id)

    def delete_knowledge_base_sync(self, knowledge_base_id: str) -> None:
        for table in ("graph_nodes", "graph_relations", "graph_kb_settings"):
            self._db.execute(f"DELETE FROM {table} WHERE kb_id = ?", (knowledge_base_id,))

    def search_namespace_sync(self, namespace: Namespace, terms: list[str], node_limit: int, relation_limit: int) -> GraphMatch:
        kb = namespace.knowledge_base_id
        rows = self._db.execute(_SEARCH_NODES, {"terms": terms, "kb": kb, "doc": namespace.knowledge_id, "limit": node_limit}).fetchall()
        nodes = [GraphNode(name, kb, doc, type_, description, list(chunks)) for name, doc, type_, description, chunks in rows]
        if not nodes:
            return GraphMatch()
        params = {"kb": kb, "docs": sorted({n.knowledge_id for n in nodes}),
                  "names": [f"{n.knowledge_id}/{n.key}" for n in nodes], "limit": relation_limit}
        relations = [
            GraphRelation(source, target, relation, kb, doc, description, list(chunks))
            for source, target, relation, doc, description, chunks in self._db.execute(_SEARCH_RELATIONS, params).fetchall()
        ]
        return GraphMatch(nodes, relations)

    def set_extraction_enabled_sync(self, knowledge_base_id: str, enabled: bool) -> None:
        self._db.execute("DELETE FROM graph_kb_settings WHERE kb_id = ?", (knowledge_base_id,))
        self._db.execute("INSERT INTO graph_kb_settings VALUES (?, ?)", (knowledge_base_id, enabled))

    def extraction_enabled_sync(self, knowledge_base_ids: list[str]) -> set[str]:
        rows = self._db.execute(
            "SELECT kb_id FROM graph_kb_settings WHERE extraction_enabled AND list_contains(?::VARCHAR[], kb_id)",
            (knowledge_base_ids,),
        ).fetchall()
        return {row[0] for row in rows}

    def close_sync(self) -> None:
        self._db.close()

    async def close(self) -> None:
        await self._run(self.close_sync)
