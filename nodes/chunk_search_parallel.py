"""chunk_search_parallel: chunk search and entity search side by side (seed: search_parallel.go).

The graph runs the two searches as parallel branches writing one results key, whose reducer
de-duplicates by chunk id and content signature (the seed's Clone + RunParallel +
removeDuplicateResults). This module holds the stage's entry, which settles what is searched,
and its join, which turns "both branches found nothing" into the search-nothing route.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from langgraph.runtime import Runtime

from ragline.graph.context import RunContext
from ragline.graph.request import PipelineRequest, SearchTarget
from ragline.graph.state import ErrorKind, PipelineError, PipelineState
from ragline.retrieval.catalog import Catalog
from ragline.services import services_of


def resolve_targets(request: PipelineRequest, catalog: Catalog) -> list[SearchTarget]:
    """Explicit targets as given; otherwise whole knowledge bases plus documents grouped by their base."""
    if request.search_targets:
        return list(request.search_targets)
    targets = [SearchTarget(knowledge_base_id=kb_id) for kb_id in dict.fromkeys(request.knowledge_base_ids)]
    by_kb: dict[str, list[str]] = defaultdict(list)
    for knowledge_id, knowledge in catalog.get_knowledge_many(request.knowledge_ids).items():
        by_kb[knowledge.knowledge_base_id].append(knowledge_id)
    whole = {t.knowledge_base_id for t in targets}
    targets += [SearchTarget(knowledge_base_id=kb, knowledge_ids=tuple(ids)) for kb, ids in by_kb.items() if kb not in whole]
    return targets


async def chunk_search_parallel(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Settle this turn's search targets (ids resolved to their knowledge bases)."""
    request = state["request"]
    if not (request.knowledge_base_ids or request.knowledge_ids or request.search_targets):
        return {"search_targets": []}  # web search only
    return {"search_targets": resolve_targets(request, services_of(runtime).retrieval.catalog)}


async def check_search_nothing(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Join of the branches: no result from either is ErrSearchNothing (the fallback answer)."""
    if state.get("search_results"):
        return {}
    return {"error": PipelineError(ErrorKind.SEARCH_NOTHING, "the search found nothing")}
