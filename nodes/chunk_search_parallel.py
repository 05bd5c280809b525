"""chunk_search_parallel: chunk search and entity search side by side (seed: search_parallel.go).

The graph runs the two searches as parallel branches writing one results key, whose reducer
de-duplicates by chunk id and content signature (the seed's Clone + RunParallel +
removeDuplicateResults). This module holds the stage's entry, which settles what is searched,
and its join, which turns "both branches found nothing" into the search-nothing route.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.runtime import Runtime

from ragline.contracts.context import RunContext, context_of
from ragline.contracts.passages import SearchTarget
from ragline.contracts.state import ErrorKind, PipelineError, PipelineState
from ragline.retrieval.chat_history import chat_history_targets
from ragline.retrieval.scope import has_knowledge_scope, resolve_targets
from ragline.services import services_of


async def chunk_search_parallel(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Settle this turn's search targets (ids resolved to their knowledge bases), plus the caller's
    chat-history base when the request asks to search past conversations (seed: IndexMessageToKB)."""
    request = state["request"]
    if not has_knowledge_scope(request) and not request.chat_history_search:
        return {"search_targets": []}  # web search only
    catalog, context = services_of(runtime).retrieval.catalog, context_of(runtime)

    def settled() -> list[SearchTarget]:  # reads the catalog (a file or Redis): in a worker thread
        targets = resolve_targets(request, catalog) if has_knowledge_scope(request) else []
        if request.chat_history_search:  # the caller's own past conversations, never another user's or tenant's
            known = {t.knowledge_base_id for t in targets}
            targets += [t for t in chat_history_targets(catalog, context.tenant_id, context.user_id) if t.knowledge_base_id not in known]
        return targets

    targets = await asyncio.to_thread(settled)
    return {"search_targets": targets}


async def check_search_nothing(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Join of the branches: no result from either is ErrSearchNothing (the fallback answer)."""
    if state.get("search_results"):
        return {}
    return {"error": PipelineError(ErrorKind.SEARCH_NOTHING, "the search found nothing")}
