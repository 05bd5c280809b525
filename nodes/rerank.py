"""chunk_rerank: rerank, composite score, FAQ boost and MMR (seed: PluginRerank, rerank.go).

The outer layer of the seed's chunk_rerank chain; memory_affinity and wiki_boost follow it. A
missing or failing rerank model (including its 60 s timeout) falls back to the search scores
and the pipeline goes on; with no rerank model at all (the offline default) results pass
through with composite scores and MMR.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from ragline import defaults
from ragline.graph.context import RunContext
from ragline.graph.request import PipelineRequest
from ragline.graph.state import PipelineState
from ragline.models.rerank import Reranker, RerankError
from ragline.retrieval.reranking import (
    Scored,
    apply_faq_boost,
    enriched_passage,
    filter_by_threshold,
    select_mmr,
    with_composite,
)
from ragline.retrieval.types import SearchResult
from ragline.services import services_of


def is_scoped(request: PipelineRequest) -> bool:
    """The user narrowed the search to documents or tags: their best hit is authoritative."""
    return bool(request.knowledge_ids) or any(target.is_scoped for target in request.search_targets)


def candidates(results: list[SearchResult]) -> list[SearchResult]:
    return sorted(results, key=lambda r: r.score, reverse=True)[: defaults.RERANK_MAX_CANDIDATES]


async def model_scores(reranker: Reranker, query: str, results: list[SearchResult]) -> list[Scored]:
    passages = [enriched_passage(r, defaults.RERANK_PASSAGE_MAX_CHARS) for r in results]
    return [Scored(results[s.index], s.score) for s in await reranker.rerank(query, passages)]


def passthrough_scores(results: list[SearchResult]) -> list[Scored]:
    """No model: the search score stands in for the model score."""
    return [Scored(r, r.score) for r in results]


async def rerank(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Rerank the search results into `rerank_results` (composite-scored, boosted, diversified)."""
    request = state["request"]
    pool = candidates(list(state.get("search_results", [])))
    reranker = services_of(runtime).reranker(request.rerank_model)
    kept: list[Scored]
    if reranker is None:
        kept = passthrough_scores(pool)
    else:
        try:
            scored = await model_scores(reranker, state.get("rewrite_query") or request.query, pool)
            keep_top1_min = 0.0 if is_scoped(request) else defaults.RERANK_FALLBACK_MIN_SCORE
            kept = filter_by_threshold(scored, request.rerank_threshold, keep_top1_min)
        except RerankError:
            kept = passthrough_scores(pool)
    results = [with_composite(s) for s in kept]
    if request.faq_priority_enabled:
        results = apply_faq_boost(results, request.faq_score_boost)
    results.sort(key=lambda r: r.score, reverse=True)
    return {"rerank_results": select_mmr(results, request.rerank_top_k)}
