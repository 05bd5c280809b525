"""extract_entity: the entities of the question, for entity search (seed: extract_entity.go, PluginExtractEntity).

Runs after query understanding, only when the intent needs knowledge-base retrieval and a
knowledge base in scope has graph extraction enabled. The model reads the rewritten question
with graph_extraction.yaml (extract_entity) and returns the entities it is about; they go to
`entities`, the graph-enabled knowledge bases to `entity_kb_ids`. Entity search is a supplement
to chunk search, so any failure here leaves both keys empty and the turn goes on.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from langgraph.runtime import Runtime

from ragline.contracts.context import RunContext
from ragline.contracts.request import PipelineRequest
from ragline.contracts.state import PipelineState, needs_kb_retrieval
from ragline.entities.extraction import ExtractionError, extract_query_entities
from ragline.models.chat import ChatModelError
from ragline.retrieval.scope import has_knowledge_scope, resolve_targets
from ragline.services import Services, services_of

log = logging.getLogger(__name__)


async def graph_enabled_kb_ids(request: PipelineRequest, services: Services) -> list[str]:
    """Knowledge bases in the request's scope whose graph extraction is enabled, in scope order."""
    targets = await asyncio.to_thread(resolve_targets, request, services.retrieval.catalog)  # the catalog: a file or Redis
    kb_ids = list(dict.fromkeys(t.knowledge_base_id for t in targets))
    store = await asyncio.to_thread(lambda: services.graph_store)  # opening DuckDB reads its file
    enabled = await store.extraction_enabled(kb_ids)
    return [kb_id for kb_id in kb_ids if kb_id in enabled]


async def extract_entity(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Extract the question's entities when a graph-enabled knowledge base is in scope.

    Reads request, intent, rewrite_query; writes entities and entity_kb_ids (nothing when the
    intent needs no knowledge retrieval, no knowledge base in scope extracts graphs, or the
    model or the graph store fails).
    """
    request = state["request"]
    if not needs_kb_retrieval(state.get("intent", "")) or not has_knowledge_scope(request):
        return {}
    services = services_of(runtime)
    try:
        kb_ids = await graph_enabled_kb_ids(request, services)
    except Exception as exc:  # an unreachable graph or catalog must not stop the answer
        log.warning("extract_entity skipped: %s", exc)
        return {}
    if not kb_ids:
        return {}
    try:
        entities = await extract_query_entities(state.get("rewrite_query") or request.query, services.chat(request.chat_model))
    except (ChatModelError, ExtractionError) as exc:
        log.warning("extract_entity found no entities: %s", exc)
        return {}
    if not entities:
        return {}
    return {"entities": entities, "entity_kb_ids": kb_ids}
