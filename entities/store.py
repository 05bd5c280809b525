"""The graph store interface, and the store the settings choose (DuckDB, or Neo4j over Bolt).

Both engines are synchronous underneath (DuckDB's connection, the neo4j sync driver): one
driver or connection per process serves every event loop, which an async driver bound to one
loop could not. `ThreadedGraphStore` turns the blocking methods into the async interface.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from ragline import defaults
from ragline.entities.types import (
    GraphMatch,
    GraphNode,
    GraphRelation,
    Namespace,
    normalize_name,
)
from ragline.settings import Settings

T = TypeVar("T")
log = logging.getLogger(__name__)


class GraphStoreError(RuntimeError):
    """The graph engine failed (connection, query)."""


class GraphUnavailableError(GraphStoreError):
    """This deployment has no entity graph (shared mode without a Bolt server)."""


class GraphStore(ABC):
    """Entity graph per document namespace, plus which knowledge bases extract into it."""

    @abstractmethod
    async def replace_document(self, knowledge_base_id: str, knowledge_id: str,
                               nodes: list[GraphNode], relations: list[GraphRelation]) -> None:
        """Swap in a document's whole graph (re-ingesting a document never duplicates nodes)."""

    @abstractmethod
    async def delete_document(self, knowledge_base_id: str, knowledge_id: str) -> None: ...

    @abstractmethod
    async def delete_knowledge_base(self, knowledge_base_id: str) -> None:
        """Its nodes, relations and its extraction setting."""

    @abstractmethod
    async def search_namespace(self, namespace: Namespace, entities: list[str],
                               node_limit: int = defaults.ENTITY_NODE_MATCH_LIMIT,
                               relation_limit: int = defaults.ENTITY_RELATION_MATCH_LIMIT) -> GraphMatch:
        """SearchNode: nodes whose name contains a query entity (or is contained in it), best
        first (exact name, then containment, then the most-cited), and the relations touching them."""

    @abstractmethod
    async def set_extraction_enabled(self, knowledge_base_id: str, enabled: bool) -> None:
        """The seed's ExtractConfig.Enabled of a knowledge base."""

    @abstractmethod
    async def extraction_enabled(self, knowledge_base_ids: Iterable[str]) -> set[str]:
        """Which of these knowledge bases have graph extraction enabled."""

    @abstractmethod
    async def close(self) -> None: ...

    @property
    def unavailable_reason(self) -> str | None:
        """Why graph extraction cannot be enabled here, or None when it can."""
        return None

    async def search(self, namespaces: list[Namespace], entities: list[str]) -> GraphMatch:
        """search_namespace over several namespaces in parallel, results in namespace order."""
        matches = await asyncio.gather(*(self.search_namespace(ns, entities) for ns in namespaces))
        merged = GraphMatch()
        for match in matches:
            merged.extend(match)
        return merged


class ThreadedGraphStore(GraphStore):
    """A GraphStore whose engine is blocking: each call runs in a worker thread, one at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        def locked() -> T:
            with self._lock:
                return fn(*args)

        try:
            return await asyncio.to_thread(locked)
        except GraphStoreError:
            raise
        except Exception as exc:  # engine errors of either backend surface as one type
            raise GraphStoreError(f"graph store failed: {exc}") from exc

    async def replace_document(self, knowledge_base_id: str, knowledge_id: str,
                               nodes: list[GraphNode], relations: list[GraphRelation]) -> None:
        nodes, relations = normalize_document_graph(knowledge_base_id, knowledge_id, nodes, relations)
        await self._run(self.replace_document_sync, knowledge_base_id, knowledge_id, nodes, relations)

    async def delete_document(self, knowledge_base_id: str, knowledge_id: str) -> None:
        await self._run(self.delete_document_sync, knowledge_base_id, knowledge_id)

    async def delete_knowledge_base(self, knowledge_base_id: str) -> None:
        await self._run(self.delete_knowledge_base_sync, knowledge_base_id)

    async def search_namespace(self, namespace: Namespace, entities: list[str],
                               node_limit: int = defaults.ENTITY_NODE_MATCH_LIMIT,
                               relation_limit: int = defaults.ENTITY_RELATION_MATCH_LIMIT) -> GraphMatch:
        terms = sorted({t for t in (normalize_name(e) for e in entities) if t})
        if not terms:
            return GraphMatch()
        return await self._run(self.search_namespace_sync, namespace, terms, node_limit, relation_limit)

    async def set_extraction_enabled(self, knowledge_base_id: str, enabled: bool) -> None:
        await self._run(self.set_extraction_enabled_sync, knowledge_base_id, enabled)

    async def extraction_enabled(self, knowledge_base_ids: Iterable[str]) -> set[str]:
        ids = sorted(set(knowledge_base_ids))
        return await self._run(self.extraction_enabled_sync, ids) if ids else set()

    @abstractmethod
    def replace_document_sync(self, knowledge_base_id: str, knowledge_id: str,
                              nodes: list[GraphNode], relations: list[GraphRelation]) -> None: ...

    @abstractmethod
    def delete_document_sync(self, knowledge_base_id: str, knowledge_id: str) -> None: ...

    @abstractmethod
    def delete_knowledge_base_sync(self, knowledge_base_id: str) -> None: ...

    @abstractmethod
    def search_namespace_sync(self, namespace: Namespace, terms: list[str], node_limit: int, relation_limit: int) -> GraphMatch:
        """`terms` are normalised and non-empty."""

    @abstractmethod
    def set_extraction_enabled_sync(self, knowledge_base_id: str, enabled: bool) -> None: ...

    @abstractmethod
    def extraction_enabled_sync(self, knowledge_base_ids: list[str]) -> set[str]: ...


def merge_nodes(nodes: list[GraphNode]) -> list[GraphNode]:
    """One node per normalised name: chunk ids united, the first type, the longest description."""
    merged: dict[str, GraphNode] = {}
    for node in nodes:
        key = node.key
        if not key:
            continue
        if key not in merged:
            merged[key] = GraphNode(node.name, node.knowledge_base_id, node.knowledge_id, node.type,
                                    node.description, list(dict.fromkeys(node.chunk_ids)))
            continue
        kept = merged[key]
        kept.type = kept.type or node.type
        if len(node.description) > len(kept.description):
            kept.description = node.description
        kept.chunk_ids = list(dict.fromkeys([*kept.chunk_ids, *node.chunk_ids]))
    return list(merged.values())


def merge_relations(relations: list[GraphRelation]) -> list[GraphRelation]:
    """One relation per (source, target, relation) name triple, chunk ids united."""
    merged: dict[tuple[str, str, str], GraphRelation] = {}
    for rel in relations:
        key = (normalize_name(rel.source), normalize_name(rel.target), normalize_name(rel.relation))
        if not key[0] or not key[1]:
            continue
        if key not in merged:
            merged[key] = GraphRelation(rel.source, rel.target, rel.relation, rel.knowledge_base_id, rel.knowledge_id,
                                        rel.description, list(dict.fromkeys(rel.chunk_ids)))
            continue
        kept = merged[key]
        if len(rel.description) > len(kept.description):
            kept.description = rel.description
        kept.chunk_ids = list(dict.fromkeys([*kept.chunk_ids, *rel.chunk_ids]))
    return list(merged.values())


def normalize_document_graph(knowledge_base_id: str, knowledge_id: str, nodes: list[GraphNode],
                             relations: list[GraphRelation]) -> tuple[list[GraphNode], list[GraphRelation]]:
    """Merged nodes and relations of one document, with a node for every relation endpoint (a
    relation to an entity the model did not list would otherwise dangle, or vanish in Neo4j)."""
    relations = merge_relations(relations)
    endpoints = [GraphNode(name, knowledge_base_id, knowledge_id, chunk_ids=list(rel.chunk_ids))
                 for rel in relations for name in (rel.source, rel.target)]
    known = {node.key for node in nodes}
    nodes = merge_nodes([*nodes, *(n for n in endpoints if n.key not in known)])
    for node in nodes:
        node.knowledge_base_id, node.knowledge_id = knowledge_base_id, knowledge_id
    for rel in relations:
        rel.knowledge_base_id, rel.knowledge_id = knowledge_base_id, knowledge_id
    return nodes, relations


SHARED_WITHOUT_BOLT = ("the entity graph is off: this deployment shares its state through Redis (RAGLINE_REDIS_URL), "
                      "where a DuckDB file on one replica's disk would be a graph the others never see; set "
                      "RAGLINE_GRAPH_BOLT_URL to a Neo4j or FalkorDB Bolt server to extract entity graphs")


class UnavailableGraphStore(GraphStore):
    """No entity graph: no knowledge base extracts one, so extraction and entity search find
    nothing to do; enabling extraction is refused with the reason. Removing is a no-op (there is
    nothing stored), so deleting a knowledge base or document never fails on the graph."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    @property
    def unavailable_reason(self) -> str | None:
        return self.reason

    async def replace_document(self, knowledge_base_id: str, knowledge_id: str,
                               nodes: list[GraphNode], relations: list[GraphRelation]) -> None:
        raise GraphUnavailableError(self.reason)

    async def delete_document(self, knowledge_base_id: str, knowledge_id: str) -> None:
        return None

    async def delete_knowledge_base(self, knowledge_base_id: str) -> None:
        return None

    async def search_namespace(self, namespace: Namespace, entities: list[str],
                               node_limit: int = defaults.ENTITY_NODE_MATCH_LIMIT,
                               relation_limit: int = defaults.ENTITY_RELATION_MATCH_LIMIT) -> GraphMatch:
        return GraphMatch()

    async def set_extraction_enabled(self, knowledge_base_id: str, enabled: bool) -> None:
        if enabled:
            raise GraphUnavailableError(self.reason)

    async def extraction_enabled(self, knowledge_base_ids: Iterable[str]) -> set[str]:
        return set()

    async def close(self) -> None:
        return None


def open_graph_store(settings: Settings) -> GraphStore:
    """The graph store the settings choose: a Bolt server when configured; else, in shared mode
    (redis_url), no graph at all (logged once, with what to set); else DuckDB under data_dir.

    Built once per process by the composition root (ragline.services.Services).
    """
    if settings.graph_bolt_url:
        from ragline.entities.neo4j_store import Neo4jGraphStore

        return Neo4jGraphStore.connect(settings.graph_bolt_url, settings.graph_bolt_user,
                                       settings.graph_bolt_password, settings.graph_bolt_database)
    if settings.redis_url:
        log.warning("%s; graph extraction and entity search are skipped", SHARED_WITHOUT_BOLT)
        return UnavailableGraphStore(SHARED_WITHOUT_BOLT)
    from ragline.entities.duckdb_store import DuckDBGraphStore

    return DuckDBGraphStore(settings.data_dir / "graph.duckdb")
