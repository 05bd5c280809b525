"""filter_top_k: a reproducible order and the rerank top-k cut (seed: filter_top_k.go).

Merge walks maps, so its order is arbitrary; this sorts by score, then document, chunk type,
chunk index and id, and keeps rerank top-k. Entries rerank kept outside the top-k (kept_by)
take no place and are appended after the cut. Then the answering model's context budget
(generation/budget.py) cuts the list to the passages it can read quickly, so the references the
client sees are the passages the model was given.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.runtime import Runtime

from ragline.contracts.context import RunContext
from ragline.contracts.passages import SearchResult
from ragline.contracts.state import PipelineState
from ragline.generation.budget import context_budget, fit_budget
from ragline.retrieval.relevance import joins_facts
from ragline.services import services_of


def deterministic_order(results: list[SearchResult]) -> list[SearchResult]:
    return sorted(results, key=lambda r: (-r.score, r.knowledge_id, str(r.chunk_type), r.chunk_index, r.id))


def filter_results(results: list[SearchResult], top_k: int) -> list[SearchResult]:
    ranked = deterministic_order([r for r in results if not r.metadata.get("kept_by")])
    extra = [r for r in results if r.metadata.get("kept_by")]
    return ranked[:top_k] + extra


async def filter_top_k(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Sort deterministically and keep rerank top-k of the merge (else rerank, else search) results."""
    request = state["request"]
    source = state.get("merge_results") or state.get("rerank_results") or state.get("search_results") or []
    kept = filter_results(list(source), request.rerank_top_k)
    services = services_of(runtime)
    client = services.chat(request.chat_model)
    budget = context_budget(services.settings, local=client.is_local)
    if budget and kept:
        query = state.get("rewrite_query") or request.query
        kept = await fit_budget(kept, budget, client.count_tokens, joins_facts=await asyncio.to_thread(joins_facts, query))
    return {"merge_results": kept}
