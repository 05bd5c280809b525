"""chunk_search_parallel: chunk search and entity search side by side (seed: search_parallel.go).

The graph runs the two searches as parallel branches writing one results key, whose reducer
de-duplicates by chunk id and content signature (the seed's Clone + RunParallel +
removeDuplicateResults). This module holds the stage's entry, which settles what is searched,
and its join, which turns "both branches found nothing" into the search-nothing route.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from ragline.graph.context import RunContext
from ragline.graph.state import ErrorKind, PipelineError, PipelineState
from ragline.retrieval.scope import has_knowledge_scope, resolve_targets
from ragline.services import services_of


async def chunk_search_parallel(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Settle this turn's search targets (ids resolved to their knowledge bases)."""
    request = state["request"]
    if not has_knowledge_scope(request):
        return {"search_targets": []}  # web search only
    return {"search_targets": resolve_targets(request, services_of(runtime).retrieval.catalog)}


async def check_search_nothing(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Join of the branches: no result from either is ErrSearchNothing (the fallback answer)."""
    if state.get("search_results"):
        return {}
    return {"error": PipelineError(ErrorKind.SEARCH_NOTHING, "the search found nothing")}
