"""chunk_rerank: rerank, composite score, FAQ boost and MMR (seed: PluginRerank, rerank.go).

The outer layer of the seed's chunk_rerank chain; memory_affinity and wiki_boost follow it. A
missing or failing rerank model (including its 60 s timeout) falls back to the search scores
and the pipeline goes on; with no rerank model at all (the offline default) results pass
through with composite scores and MMR.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from ragline.contracts.context import RunContext
from ragline.contracts.request import PipelineRequest
from ragline.contracts.state import PipelineState
from ragline.retrieval.reranking import rerank_results
from ragline.services import services_of


def is_scoped(request: PipelineRequest) -> bool:
    """The user narrowed the search to documents or tags: their best hit is authoritative."""
    return bool(request.knowledge_ids) or any(target.is_scoped for target in request.search_targets)


async def rerank(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Rerank the search results into `rerank_results` (composite-scored, boosted, diversified)."""
    request = state["request"]
    results = await rerank_results(
        state.get("rewrite_query") or request.query,
        list(state.get("search_results", [])),
        services_of(runtime).reranker(request.rerank_model),
        threshold=request.rerank_threshold,
        top_k=request.rerank_top_k,
        scoped=is_scoped(request),
        faq_boost=request.faq_score_boost if request.faq_priority_enabled else None,
        vector_threshold=request.vector_threshold,
    )
    return {"rerank_results": results}
