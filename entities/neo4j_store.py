"""The graph store on a Neo4j server (or any Bolt server speaking this Cypher) via the `neo4j` driver.

Nodes are `(:Entity {kb_id, knowledge_id, name, name_norm, type, description, chunk_ids})`,
relations `[:RELATED {relation, source, target, description, chunk_ids}]`, the per-KB setting
`(:GraphKnowledgeBase {kb_id, extraction_enabled})`. Only portable Cypher is used (no APOC, no
full-text indexes, no IF NOT EXISTS) so FalkorDB's Bolt endpoint serves the tests.

One driver per (URL, user, database) per process, closed at exit: a driver is a connection
pool, and re-creating one after closing another can hang in the Bolt handshake on some servers.
"""

from __future__ import annotations

import atexit
import threading
from typing import Any

import neo4j
from neo4j.exceptions import Neo4jError

from ragline.entities.store import ThreadedGraphStore
from ragline.entities.types import (
    GraphMatch,
    GraphNode,
    GraphRelation,
    Namespace,
    normalize_name,
)

_CONNECTION_TIMEOUT_S = 10.0  # a Bolt server that does not answer fails the call, not the process
_RETRY_TIME_S = 2.0  # the driver's default (30 s of retries) would stall a question on a dead server

_INDEXES = (
    "CREATE INDEX FOR (n:Entity) ON (n.kb_id)",
    "CREATE INDEX FOR (n:Entity) ON (n.knowledge_id)",
    "CREATE INDEX FOR (c:GraphKnowledgeBase) ON (c.kb_id)",
)

_DELETE_DOCUMENT = "MATCH (n:Entity {kb_id: $kb, knowledge_id: $doc}) DETACH DELETE n"
_CREATE_NODES = """
UNWIND $nodes AS row
CREATE (:Entity {kb_id: $kb, knowledge_id: $doc, name: row.name, name_norm: row.name_norm, type: row.type,
                 description: row.description, chunk_ids: row.chunk_ids})
"""
_CREATE_RELATIONS = """
UNWIND $relations AS row
MATCH (a:Entity {kb_id: $kb, knowledge_id: $doc, name_norm: row.source_norm})
MATCH (b:Entity {kb_id: $kb, knowledge_id: $doc, name_norm: row.target_norm})
CREATE (a)-[:RELATED {relation: row.relation, source: row.source, target: row.target,
                      description: row.description, chunk_ids: row.chunk_ids}]->(b)
"""
# rank 0: same name; 1: the node name contains an entity; 2: an entity contains the node name
_SEARCH_NODES = """
MATCH (n:Entity) WHERE n.kb_id = $kb AND ($doc IS NULL OR n.knowledge_id = $doc)
WITH n, [t IN $terms WHERE n.name_norm CONTAINS t OR (size(n.name_norm) >= 2 AND t CONTAINS n.name_norm)] AS hits
WHERE size(hits) > 0
WITH n, CASE WHEN n.name_norm IN hits THEN 0 WHEN any(t IN hits WHERE n.name_norm CONTAINS t) THEN 1 ELSE 2 END AS rank
RETURN n.name AS name, n.name_norm AS name_norm, n.knowledge_id AS knowledge_id, n.type AS type,
       n.description AS description, n.chunk_ids AS chunk_ids, rank, size(n.chunk_ids) AS cited
ORDER BY rank, cited DESC, name_norm, knowledge_id
LIMIT $limit
"""
# the parentheses matter: FalkorDB binds IN tighter than string +
_SEARCH_RELATIONS = """
MATCH (a:Entity)-[r:RELATED]->(b:Entity)
WHERE a.kb_id = $kb AND a.knowledge_id IN $docs
  AND ((a.knowledge_id + '/' + a.name_norm) IN $names OR (b.knowledge_id + '/' + b.name_norm) IN $names)
RETURN r.source AS source, r.target AS target, r.relation AS relation, a.knowledge_id AS knowledge_id,
       r.description AS description, r.chunk_ids AS chunk_ids, a.name_norm AS source_norm, b.name_norm AS target_norm
ORDER BY knowledge_id, source_norm, target_norm, relation
LIMIT $limit
"""

_drivers: dict[tuple[str, str | None], neo4j.Driver] = {}
_drivers_lock = threading.Lock()


def shared_driver(url: str, user: str | None = None, password: str | None = None) -> neo4j.Driver:
    """The process's pooled driver for this server and user (created once, closed at exit)."""
    key = (url, user)
    with _drivers_lock:
        if key not in _drivers:
            auth = (user, password or "") if user else None
            driver = neo4j.GraphDatabase.driver(url, auth=auth, connection_timeout=_CONNECTION_TIMEOUT_S,
                                                connection_acquisition_timeout=_CONNECTION_TIMEOUT_S,
                                                max_transaction_retry_time=_RETRY_TIME_S)
            atexit.register(driver.close)
            _drivers[key] = driver
        return _drivers[key]


class Neo4jGraphStore(ThreadedGraphStore):
    def __init__(self, driver: neo4j.Driver, database: str | None = None) -> None:
        super().__init__()
        self.driver = driver
        self.database = database
        self._indexed = False

    @classmethod
    def connect(cls, url: str, user: str | None = None, password: str | None = None, database: str | None = None) -> Neo4jGraphStore:
        return cls(shared_driver(url, user, password), database)

    def _ensure_indexes(self) -> None:
        """Created on first use; an index that already exists is an error on both engines, ignored."""
        if self._indexed:
            return
        for statement in _INDEXES:
            try:
                self._run_query(statement)
            except Neo4jError:
                pass
        self._indexed = True

    def _run_query(self, query: str, **params: Any) -> list[dict[str, Any]]:
        records, _, _ = self.driver.execute_query(query, params, database_=self.database)
        return [record.data() for record in records]

    def _write(self, statements: list[tuple[str, dict[str, Any]]]) -> None:
        """Several statements in one transaction: a document's graph is swapped atomically."""
        def work(tx: neo4j.ManagedTransaction) -> None:
            for query, params in statements:
                tx.run(query, params).consume()

        with self.driver.session(database=self.database) as session:
            session.execute_write(work)

    def replace_document_sync(self, knowledge_base_id: str, knowledge_id: str,
                              nodes: list[GraphNode], relations: list[GraphRelation]) -> None:
        self._ensure_indexes()
        scope = {"kb": knowledge_base_id, "doc": knowledge_id}
        node_rows = [{"name": n.name, "name_norm": n.key, "type": n.type, "description": n.description,
                      "chunk_ids": n.chunk_ids} for n in nodes]
        relation_rows = [{"source": r.source, "target": r.target, "source_norm": normalize_name(r.source),
                          "target_norm": normalize_name(r.target), "relation": r.relation,
                          "description": r.description, "chunk_ids": r.chunk_ids} for r in relations]
        statements: list[tuple[str, dict[str, Any]]] = [(_DELETE_DOCUMENT, scope)]
        if node_rows:
            statements.append((_CREATE_NODES, {**scope, "nodes": node_rows}))
        if relation_rows:
            statements.append((_CREATE_RELATIONS, {**scope, "relations": relation_rows}))
        self._write(statements)

    def delete_document_sync(self, knowledge_base_id: str, knowledge_id: str) -> None:
        self._run_query(_DELETE_DOCUMENT, kb=knowledge_base_id, doc=knowledge_id)

    def delete_knowledge_base_sync(self, knowledge_base_id: str) -> None:
        self._write([("MATCH (n:Entity {kb_id: $kb}) DETACH DELETE n", {"kb": knowledge_base_id}),
                     ("MATCH (c:GraphKnowledgeBase {kb_id: $kb}) DELETE c", {"kb": knowledge_base_id})])

    def search_namespace_sync(self, namespace: Namespace, terms: list[str], node_limit: int, relation_limit: int) -> GraphMatch:
        kb = namespace.knowledge_base_id
        rows = self._run_query(_SEARCH_NODES, kb=kb, doc=namespace.knowledge_id, terms=terms, limit=node_limit)
        nodes = [GraphNode(r["name"], kb, r["knowledge_id"], r["type"] or "", r["description"] or "", list(r["chunk_ids"] or []))
                 for r in rows]
        if not nodes:
            return GraphMatch()
        rows = self._run_query(_SEARCH_RELATIONS, kb=kb, docs=sorted({n.knowledge_id for n in nodes}),
                               names=[f"{n.knowledge_id}/{n.key}" for n in nodes], limit=relation_limit)
        relations = [GraphRelation(r["source"], r["target"], r["relation"] or "", kb, r["knowledge_id"],
                                   r["description"] or "", list(r["chunk_ids"] or [])) for r in rows]
        return GraphMatch(nodes, relations)

    def set_extraction_enabled_sync(self, knowledge_base_id: str, enabled: bool) -> None:
        self._ensure_indexes()
        self._run_query("MERGE (c:GraphKnowledgeBase {kb_id: $kb}) SET c.extraction_enabled = $enabled",
                        kb=knowledge_base_id, enabled=enabled)

    def extraction_enabled_sync(self, knowledge_base_ids: list[str]) -> set[str]:
        rows = self._run_query("MATCH (c:GraphKnowledgeBase) WHERE c.kb_id IN $ids AND c.extraction_enabled = true "
                               "RETURN c.kb_id AS kb_id", ids=knowledge_base_ids)
        return {row["kb_id"] for row in rows}

    async def close(self) -> None:
        """Nothing to do: the driver is shared by the process and closed at exit."""
