"""Passages for an agent's query: the hybrid search, then the rerank chain, over bases a tenant may read.

One path for every agent-facing search: LangChain's `RaglineRetriever` (ragline/agent_tools.py)
and agent mode's `search_knowledge` tool (nodes/tools/search_knowledge.py) both call it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ragline import defaults
from ragline.contracts.access import Principal
from ragline.contracts.passages import ChunkType, SearchResult
from ragline.retrieval.reranking import rerank_results
from ragline.retrieval.types import SearchParams

QUERY_LIMIT = 2_000  # characters of a tool call's question: an agent's query, not a document
IMAGE_HITS = (ChunkType.IMAGE_OCR, ChunkType.IMAGE_CAPTION, ChunkType.IMAGE_VECTOR)


@dataclass(frozen=True)
class Found:
    passages: list[SearchResult]  # reranked
    image_candidates: list[SearchResult] = field(default_factory=list)  # image hits the rerank dropped, best first


async def search_passages(stack: Any, reranker: Any, query: str, knowledge_bases: Sequence[str], who: Principal, *,
                          top_k: int = defaults.DEFAULT_RERANK_TOP_K) -> list[SearchResult]:
    """The reranked passages of `knowledge_bases` (names or ids) for `query`; a base the tenant
    may not read is reported as missing (RetrievalError), as any unknown base."""
    return (await search_with_images(stack, reranker, query, knowledge_bases, who, top_k=top_k)).passages


async def search_with_images(stack: Any, reranker: Any, query: str, knowledge_bases: Sequence[str], who: Principal, *,
                             top_k: int = defaults.DEFAULT_RERANK_TOP_K) -> Found:
    """`search_passages`, and the search's image hits kept aside before the rerank (at most
    CONTEXT_IMAGES_MAX that it dropped): a text reranker judges a picture by its caption or OCR,
    and a model that sees may still read the picture (the seed's search_knowledge image candidates)."""
    if not query.strip():
        return Found([])
    kb_ids = await asyncio.to_thread(kb_ids_of, stack, knowledge_bases, who)
    hits = await stack.searcher.search(SearchParams(query=query[:QUERY_LIMIT], knowledge_base_ids=kb_ids, tenant_id=who.tenant_id, reader=who))
    pictures = [hit for hit in hits if hit.chunk_type in IMAGE_HITS]
    passages = await rerank_results(query, hits, reranker, threshold=defaults.DEFAULT_RERANK_THRESHOLD, top_k=top_k, scoped=False)
    kept = {passage.id for passage in passages}
    return Found(passages, [hit for hit in pictures if hit.id not in kept][: defaults.CONTEXT_IMAGES_MAX])


def kb_ids_of(stack: Any, knowledge_bases: Sequence[str], who: Principal) -> list[str]:
    """Names or ids as ids the tenant may read (a base it may not read is reported as missing)."""
    return [stack.knowledge_bases.resolve(kb, who).id for kb in knowledge_bases]
