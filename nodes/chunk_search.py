"""chunk_search: hybrid search over the turn's targets (seed: PluginSearch, search.go).

Targets are grouped by embedding-model identity and the query is embedded once per group;
whole-knowledge-base targets of a group share one HybridSearch call, targets scoped to
documents or tags run one by one with recall thresholds off (what the user pointed at is kept).
Whole-base hits then pass the relevance gate (retrieval/relevance.py): passages with no evidence
for the question go, so an off-topic question finds nothing and gets the fallback answer.
Web search, when enabled, runs beside the knowledge search.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

from langgraph.runtime import Runtime

from ragline import defaults
from ragline.graph import events
from ragline.graph.context import RunContext, context_of
from ragline.graph.request import PipelineRequest, SearchTarget
from ragline.graph.state import (
    ErrorKind,
    PipelineError,
    PipelineState,
    merge_search_results,
)
from ragline.models.embeddings import EmbeddingError
from ragline.retrieval.errors import (
    EmbeddingModelMismatchError,
    KnowledgeBaseAccessError,
    KnowledgeBaseNotFoundError,
    RetrievalError,
)
from ragline.retrieval.expansion import expand_search
from ragline.retrieval.relevance import relevant
from ragline.retrieval.scope import target_documents
from ragline.retrieval.stack import RetrievalStack
from ragline.retrieval.types import MatchType, SearchParams, SearchResult
from ragline.services import services_of
from ragline.web.search import WebSearch, WebSearchError

_REQUEST_ERRORS = (KnowledgeBaseNotFoundError, KnowledgeBaseAccessError, EmbeddingModelMismatchError)


def _params(request: PipelineRequest, query: str, tenant: str, kb_ids: list[str], embedding: list[float], **extra: Any) -> SearchParams:
    return SearchParams(
        query=query,
        knowledge_base_ids=kb_ids,
        tenant_id=tenant,
        match_count=request.embedding_top_k,
        vector_threshold=request.vector_threshold,
        keyword_threshold=request.keyword_threshold,
        query_embedding=embedding,
        **extra,
    )


async def search_targets(stack: RetrievalStack, request: PipelineRequest, query: str, tenant: str, targets: list[SearchTarget]) -> list[SearchResult]:
    """searchByTargets: one embedding per model identity, one call for whole bases, one per scoped target."""
    kbs = stack.searcher.authorize([t.knowledge_base_id for t in targets], tenant)
    kb_by_id = {kb.id: kb for kb in kbs}
    groups: dict[str, list[SearchTarget]] = defaultdict(list)
    for target in targets:
        groups[kb_by_id[target.knowledge_base_id].embedding_key].append(target)
    searches: list[SearchParams] = []
    for group in groups.values():
        embedding = await stack.embedders.for_kb(kb_by_id[group[0].knowledge_base_id]).embed_query(query)
        whole = [t.knowledge_base_id for t in group if not t.is_scoped]
        if whole:
            searches.append(_params(request, query, tenant, whole, embedding))
        for target in (t for t in group if t.is_scoped):
            knowledge_ids = target_documents(target, stack.catalog) or []
            if knowledge_ids:
                searches.append(_params(request, query, tenant, [target.knowledge_base_id], embedding, knowledge_ids=knowledge_ids, disable_recall_thresholds=True))
    batches = await asyncio.gather(*(stack.searcher.search(p) for p in searches))
    results = merge_search_results([], [result for batch in batches for result in batch])
    # query expansion (seed: query_expansion.go): only when recall fell short of embedding top-k
    if request.query_expansion_enabled and len(results) < request.embedding_top_k:
        expanded = await expand_search(stack.searcher, searches, request.embedding_top_k, request.rerank_top_k)
        results = merge_search_results(results, expanded)  # primary hits keep their place
    if not request.relevance_gate_enabled:
        return results
    scoped = {hit.id for params, batch in zip(searches, batches, strict=True) if params.disable_recall_thresholds for hit in batch}
    # an image found through its own vector has no words to weigh: the rerank image rules judge it instead
    scoped |= {hit.id for hit in results if hit.match_type == MatchType.IMAGE_VECTOR}
    return gate_whole_bases(query, results, scoped)


def gate_whole_bases(query: str, results: list[SearchResult], scoped: set[str]) -> list[SearchResult]:
    """The relevance gate on whole-base hits, each base judged against its own hits; scoped hits stay."""
    kept: dict[str, SearchResult] = {}
    for kb_id in {result.knowledge_base_id for result in results if result.id not in scoped}:
        pool = [result for result in results if result.knowledge_base_id == kb_id and result.id not in scoped]
        kept |= {hit.id: hit for hit in relevant(query, pool)}
    return [kept.get(result.id, result) for result in results if result.id in scoped or result.id in kept]


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
            results = await search_targets(services.retrieval, request, query, context.tenant_id, targets)
        except (RetrievalError, EmbeddingError) as exc:  # EmbeddingError: the question cannot be embedded (retries spent)
            web.cancel()
            # a missing or forbidden knowledge base means a wrong request; anything else, a failing store
            kind = ErrorKind.INVALID_INPUT if isinstance(exc, _REQUEST_ERRORS) else ErrorKind.RETRIEVAL
            events.emit(context, events.error(state["turn"], str(exc), code=kind.value))
            return {"error": PipelineError(kind, str(exc))}
    return {"search_results": merge_search_results(results, await web)}
