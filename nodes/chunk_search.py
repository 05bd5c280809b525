"""chunk_search: hybrid search over the turn's targets (seed: PluginSearch, search.go).

The search itself is the retrieval service's (retrieval/targets.py): targets grouped by
embedding-model identity, the query embedded once per group, whole bases of a group searched in
one HybridSearch call, scoped targets one by one with recall thresholds off, then the relevance
gate on the whole-base hits (an off-topic question finds nothing and gets the fallback answer).
This stage gives it the request's numbers, runs web search beside it when enabled, and turns a
failure into the turn's error.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.runtime import Runtime

from ragline import defaults
from ragline.contracts import events
from ragline.contracts.context import RunContext, context_of
from ragline.contracts.events import ProgressWindow
from ragline.contracts.passages import SearchResult, merge_search_results
from ragline.contracts.request import PipelineRequest
from ragline.contracts.state import ErrorKind, PipelineError, PipelineState
from ragline.models.embeddings import EmbeddingError
from ragline.retrieval.errors import (
    EmbeddingModelMismatchError,
    KnowledgeBaseAccessError,
    KnowledgeBaseNotFoundError,
    RetrievalError,
)
from ragline.retrieval.targets import TargetSearch, search_targets
from ragline.services import services_of
from ragline.web.search import WebSearch, WebSearchError

_REQUEST_ERRORS = (KnowledgeBaseNotFoundError, KnowledgeBaseAccessError, EmbeddingModelMismatchError)


def target_search(request: PipelineRequest) -> TargetSearch:
    """The request's numbers for the retrieval service's search over targets."""
    return TargetSearch(embedding_top_k=request.embedding_top_k, rerank_top_k=request.rerank_top_k,
                        vector_threshold=request.vector_threshold, keyword_threshold=request.keyword_threshold,
                        query_expansion=request.query_expansion_enabled, relevance_gate=request.relevance_gate_enabled)


async def web_results(request: PipelineRequest, query: str, web: WebSearch, tenant_id: str | None = None) -> list[SearchResult]:
    """searchWebIfEnabled: a failing web search costs its results, never the answer."""
    if not request.web_search_enabled:
        return []
    try:
        return await asyncio.wait_for(web.search(query, tenant_id), defaults.WEB_SEARCH_TIMEOUT_S)  # the tenant's provider
    except (WebSearchError, TimeoutError):
        return []


async def chunk_search(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Search the knowledge bases in scope (and the web when enabled) for the rewritten question."""
    request, context = state["request"], context_of(runtime)
    targets = state.get("search_targets", [])
    query = state.get("rewrite_query") or request.query
    services = services_of(runtime)
    web = asyncio.ensure_future(web_results(request, query, services.web_search, context.tenant_id))
    results: list[SearchResult] = []
    if targets:
        try:
            results = await search_targets(services.retrieval, query, context.principal(), targets, target_search(request))
        except (RetrievalError, EmbeddingError) as exc:  # EmbeddingError: the question cannot be embedded (retries spent)
            web.cancel()
            # a missing or forbidden knowledge base means a wrong request; anything else, a failing store
            kind = ErrorKind.INVALID_INPUT if isinstance(exc, _REQUEST_ERRORS) else ErrorKind.RETRIEVAL
            events.fail_turn(context, state["turn"], PipelineError(kind, str(exc)), card=ProgressWindow.KNOWLEDGE_SEARCH)
    return {"search_results": merge_search_results(results, await web)}
