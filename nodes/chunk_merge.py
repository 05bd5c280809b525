"""chunk_merge: turn ranked hits into whole, non-overlapping contexts (seed: PluginMerge, merge.go).

The seed's eight steps in order: input choice, de-duplication, history references, parent
resolution, order-preserving merge of neighbours, FAQ answers, short-chunk expansion, and a final
merge, de-duplication and partial-overlap removal. Adjacency is decided by text and chunk index.
Image hits chain to the text around their image in step 4 (retrieval/merge_images.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.runtime import Runtime

from ragline.contracts.context import RunContext
from ragline.contracts.passages import SearchResult
from ragline.contracts.state import PipelineState
from ragline.retrieval import merge as step
from ragline.retrieval.catalog import Catalog
from ragline.retrieval.merge_images import prune_markdown_images
from ragline.services import services_of


async def chunk_merge(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Merge rerank (or search) results into `merge_results` (in a worker thread: the steps read the catalog and compare texts)."""
    catalog = services_of(runtime).retrieval.catalog
    return {"merge_results": await asyncio.to_thread(merged, state, catalog)}


def merged(state: PipelineState, catalog: Catalog) -> list[SearchResult]:
    """The seed's eight merge steps, in order, over this turn's results."""
    request = state["request"]
    results = step.choose_input(state.get("rerank_results", []), state.get("search_results", []), request.rerank_top_k)
    results = step.deduplicate(results)
    results = step.deduplicate([*results, *step.history_references(state.get("history", []), state.get("rewrite_query") or request.query)])
    results = step.resolve_parents(results, catalog)
    results = step.merge_sequential(results)
    results = step.fill_faq_answers(results)
    results = step.expand_short_chunks(results, catalog)
    results = step.merge_sequential(results)
    results = step.remove_partial_overlaps(step.deduplicate(results))
    # expansion may have brought a neighbour's image references: again only images some result found stay
    return prune_markdown_images(results)
