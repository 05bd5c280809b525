"""wiki_boost: prefer wiki pages when a wiki-enabled knowledge base is searched (seed: wiki_boost.go).

The last post-processing step of chunk_rerank. Wiki pages are knowledge an LLM already
synthesised from the raw chunks, so when one is among the results and a knowledge base in scope
has its wiki enabled, its score is multiplied by 1.3 and the list re-sorted stably.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.runtime import Runtime

from ragline import defaults
from ragline.contracts.context import RunContext
from ragline.contracts.passages import SearchResult
from ragline.contracts.state import PipelineState
from ragline.services import services_of

WIKI_PAGE = "wiki_page"


def is_wiki_page(result: SearchResult) -> bool:
    return str(result.chunk_type) == WIKI_PAGE or result.metadata.get("chunk_type") == WIKI_PAGE


def boost_wiki_pages(results: list[SearchResult], wiki_kb_ids: set[str]) -> list[SearchResult]:
    boosted = [
        r.model_copy(update={"score": r.score * defaults.WIKI_BOOST_FACTOR, "metadata": {**r.metadata, "wiki_boosted": True}})
        if is_wiki_page(r) and r.knowledge_base_id in wiki_kb_ids
        else r
        for r in results
    ]
    return sorted(boosted, key=lambda r: r.score, reverse=True)


async def wiki_boost(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Boost wiki pages of wiki-enabled knowledge bases in scope."""
    results = list(state.get("rerank_results", []))
    if not any(is_wiki_page(r) for r in results):
        return {}
    kb_ids = {r.knowledge_base_id for r in results}
    kbs = await asyncio.to_thread(services_of(runtime).retrieval.catalog.get_kbs, sorted(kb_ids))
    wiki_kb_ids = {kb_id for kb_id, kb in kbs.items() if getattr(kb, "wiki_enabled", False)}
    if not wiki_kb_ids:
        return {}
    return {"rerank_results": boost_wiki_pages(results, wiki_kb_ids)}
