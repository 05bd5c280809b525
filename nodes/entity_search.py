"""entity_search: chunks found through the entity graph (seed: search_entity.go, PluginSearchEntity).

The branch of chunk_search_parallel beside chunk search. For the question's entities, nodes are
matched per namespace in parallel: a whole knowledge base, or each document of a scoped target.
The chunks the matched nodes and their relations were read from are fetched by id and kept
only when they still belong to a knowledge base in this turn's scope (one the caller may use)
and to an existing document, and, for a scoped target, to one of its documents; at most 30.
Graph hits have no search score (0), which rerank replaces with the model's.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from langgraph.runtime import Runtime

from ragline import defaults
from ragline.entities.store import GraphStoreError
from ragline.entities.types import GraphMatch, Namespace
from ragline.graph.context import RunContext, context_of
from ragline.graph.state import PipelineState
from ragline.retrieval.catalog import Catalog
from ragline.retrieval.scope import DocumentScope, resolve_targets
from ragline.retrieval.types import SearchResult
from ragline.services import services_of

log = logging.getLogger(__name__)

GRAPH_SOURCE = "graph"


def namespaces_of(scope: DocumentScope) -> list[Namespace]:
    """The seed's NameSpace{KnowledgeBase, Knowledge} list searched in parallel."""
    out: list[Namespace] = []
    for kb_id, documents in scope.documents.items():
        if documents is None:
            out.append(Namespace(kb_id))
        else:
            out += [Namespace(kb_id, knowledge_id) for knowledge_id in sorted(documents)]
    return out


def _graph_facts(match: GraphMatch) -> tuple[list[str], dict[str, list[str]], dict[str, list[str]]]:
    """Chunk ids in match order (nodes first, then relations), with the entities and relations naming each."""
    order: list[str] = []
    entities: dict[str, list[str]] = {}
    relations: dict[str, list[str]] = {}
    for node in match.nodes:
        for chunk_id in node.chunk_ids:
            order.append(chunk_id)
            entities.setdefault(chunk_id, []).append(node.name)
    for rel in match.relations:
        for chunk_id in rel.chunk_ids:
            order.append(chunk_id)
            relations.setdefault(chunk_id, []).append(f"{rel.source} {rel.relation} {rel.target}".strip())
    return list(dict.fromkeys(order)), entities, relations


def graph_results(match: GraphMatch, catalog: Catalog, scope: DocumentScope, tenant_id: str,
                  limit: int = defaults.ENTITY_SEARCH_MAX_RESULTS) -> list[SearchResult]:
    """The matched chunks as SearchResults (score 0), checked against the catalog and the scope."""
    order, entities, relations = _graph_facts(match)
    chunks = catalog.get_chunks(order)
    kbs = catalog.get_kbs(sorted({c.knowledge_base_id for c in chunks.values()}))
    documents = catalog.get_knowledge_many(c.knowledge_id for c in chunks.values())
    results: list[SearchResult] = []
    for chunk_id in order:
        chunk = chunks.get(chunk_id)
        if chunk is None or not scope.allows(chunk.knowledge_base_id, chunk.knowledge_id):
            continue
        kb, document = kbs.get(chunk.knowledge_base_id), documents.get(chunk.knowledge_id)
        if kb is None or document is None or not kb.readable_by(tenant_id):
            continue
        results.append(SearchResult(
            id=chunk.id, content=chunk.content, score=0.0, knowledge_id=chunk.knowledge_id,
            knowledge_base_id=chunk.knowledge_base_id, knowledge_title=document.title, chunk_index=chunk.chunk_index,
            chunk_type=chunk.chunk_type, pre_chunk_id=chunk.pre_id, next_chunk_id=chunk.next_id,
            parent_chunk_id=chunk.parent_id,
            metadata={**chunk.metadata, "source": GRAPH_SOURCE, "match_type": GRAPH_SOURCE,
                      "graph_entities": entities.get(chunk_id, []), "graph_relations": relations.get(chunk_id, [])},
        ))
        if len(results) >= limit:
            break
    return results


async def entity_search(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Search the entity graph for the question's entities and return the chunks behind the hits.

    Reads entities, entity_kb_ids, search_targets (or the request); writes search_results
    (merged with chunk search by the reducer) and graph_result (matched nodes and relations).
    A failing graph store yields nothing: chunk search still answers.
    """
    entities, kb_ids = state.get("entities") or [], state.get("entity_kb_ids") or []
    if not entities or not kb_ids:
        return {}
    request, context, services = state["request"], context_of(runtime), services_of(runtime)
    try:
        catalog = services.retrieval.catalog
        targets = state.get("search_targets") or resolve_targets(request, catalog)
        scope = DocumentScope.of(targets, catalog, kb_ids)
        search = services.graph_store.search(namespaces_of(scope), entities)
        match = await asyncio.wait_for(search, defaults.ENTITY_SEARCH_TIMEOUT_S)
    except (GraphStoreError, TimeoutError) as exc:
        log.warning("entity_search failed: %s", exc)
        return {}
    results = graph_results(match, catalog, scope, context.tenant_id)
    return {"search_results": results, "graph_result": match.to_dict()}
