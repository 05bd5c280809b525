"""entity_search: chunks found through the entity graph (seed: search_entity.go, PluginSearchEntity).

The branch of chunk_search_parallel beside chunk search: the turn's scope and the question's
entities, given to the retrieval service (retrieval/entity_hits.py). A failing or slow graph
store costs its hits only: chunk search still answers.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from langgraph.runtime import Runtime

from ragline.contracts.context import RunContext, context_of
from ragline.contracts.state import PipelineState
from ragline.entities.store import GraphStoreError
from ragline.retrieval.entity_hits import search_entity_graph
from ragline.retrieval.scope import DocumentScope, resolve_targets
from ragline.services import services_of

log = logging.getLogger(__name__)


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
        targets = state.get("search_targets") or await asyncio.to_thread(resolve_targets, request, catalog) or []
        scope = await asyncio.to_thread(DocumentScope.of, targets, catalog, kb_ids)  # the catalog: a file or Redis
        store = await asyncio.to_thread(lambda: services.graph_store)
        match, results = await search_entity_graph(store, catalog, scope, entities, context.principal())
    except (GraphStoreError, TimeoutError) as exc:
        log.warning("entity_search failed: %s", exc)
        return {}
    return {"search_results": results, "graph_result": match.to_dict()}
