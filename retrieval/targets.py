"""A turn's knowledge search over its targets (seed: searchByTargets), as one retrieval service call.

One embedding per embedding model among the targets; one search for the whole bases of that
model and one per scoped target (documents or tags); query expansion when recall fell short
(query_expansion.go); then the relevance gate on the whole-base hits, each base judged against its
own hits. The `chunk_search` node calls it with the request's numbers, and so do the benchmarks.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from ragline import defaults
from ragline.contracts.access import Principal
from ragline.contracts.passages import MatchType, SearchResult, SearchTarget, merge_search_results
from ragline.retrieval.expansion import expand_search
from ragline.retrieval.relevance import relevant
from ragline.retrieval.scope import target_documents
from ragline.retrieval.stack import RetrievalStack
from ragline.retrieval.types import SearchParams


@dataclass(frozen=True)
class TargetSearch:
    """The numbers of one search over targets (a turn's request carries them)."""

    embedding_top_k: int = defaults.DEFAULT_EMBEDDING_TOP_K  # hits kept per search before rerank
    rerank_top_k: int = defaults.DEFAULT_RERANK_TOP_K
    vector_threshold: float = defaults.DEFAULT_VECTOR_THRESHOLD
    keyword_threshold: float = defaults.DEFAULT_KEYWORD_THRESHOLD
    query_expansion: bool = True  # keyword variants when recall is below embedding_top_k
    relevance_gate: bool = True  # drop whole-base hits with no evidence for the question

    def params(self, query: str, who: Principal, kb_ids: list[str], embedding: list[float], **extra: Any) -> SearchParams:
        return SearchParams(query=query, knowledge_base_ids=kb_ids, tenant_id=who.tenant_id, reader=who, match_count=self.embedding_top_k,
                            vector_threshold=self.vector_threshold, keyword_threshold=self.keyword_threshold,
                            query_embedding=embedding, **extra)


async def search_targets(stack: RetrievalStack, query: str, who: Principal, targets: list[SearchTarget],
                         search: TargetSearch = TargetSearch()) -> list[SearchResult]:
    """The hits for `query` over `targets`, the relevance gate applied to whole bases."""
    kbs = await asyncio.to_thread(stack.searcher.authorize, [t.knowledge_base_id for t in targets], who)
    kb_by_id = {kb.id: kb for kb in kbs}
    groups: dict[str, list[SearchTarget]] = defaultdict(list)
    for target in targets:
        groups[kb_by_id[target.knowledge_base_id].embedding_key].append(target)
    searches: list[SearchParams] = []
    for group in groups.values():
        embedding = await stack.embedders.for_kb(kb_by_id[group[0].knowledge_base_id]).embed_query(query)
        whole = [t.knowledge_base_id for t in group if not t.is_scoped]
        if whole:
            searches.append(search.params(query, who, whole, embedding))
        for target in (t for t in group if t.is_scoped):
            knowledge_ids = await asyncio.to_thread(target_documents, target, stack.catalog) or []
            if knowledge_ids:
                searches.append(search.params(query, who, [target.knowledge_base_id], embedding,
                                              knowledge_ids=knowledge_ids, disable_recall_thresholds=True))
    batches = await asyncio.gather(*(stack.searcher.search(p) for p in searches))
    results = merge_search_results([], [result for batch in batches for result in batch])
    if search.query_expansion and len(results) < search.embedding_top_k:
        expanded = await expand_search(stack.searcher, searches, search.embedding_top_k, search.rerank_top_k)
        results = merge_search_results(results, expanded)  # primary hits keep their place
    if not search.relevance_gate:
        return results
    scoped = {hit.id for params, batch in zip(searches, batches, strict=True) if params.disable_recall_thresholds for hit in batch}
    # an image found through its own vector has no words to weigh: the rerank image rules judge it instead
    scoped |= {hit.id for hit in results if hit.match_type == MatchType.IMAGE_VECTOR}
    return await asyncio.to_thread(gate_whole_bases, query, results, scoped)  # CPU work (and jieba loads its dictionary once)


def gate_whole_bases(query: str, results: list[SearchResult], scoped: set[str]) -> list[SearchResult]:
    """The relevance gate on whole-base hits, each base judged against its own hits; scoped hits stay."""
    kept: dict[str, SearchResult] = {}
    for kb_id in {result.knowledge_base_id for result in results if result.id not in scoped}:
        pool = [result for result in results if result.knowledge_base_id == kb_id and result.id not in scoped]
        kept |= {hit.id: hit for hit in relevant(query, pool)}
    return [kept.get(result.id, result) for result in results if result.id in scoped or result.id in kept]
