"""Passages for an agent's query: the hybrid search, then the rerank chain, over bases a tenant may read.

One path for every agent-facing search: LangChain's `RaglineRetriever` (ragline/agent_tools.py)
and agent mode's `search_knowledge` tool (nodes/tools/search_knowledge.py) both call it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from ragline import defaults
from ragline.retrieval.reranking import rerank_results
from ragline.retrieval.types import SearchParams, SearchResult

QUERY_LIMIT = 2_000  # characters of a tool call's question: an agent's query, not a document


async def search_passages(stack: Any, reranker: Any, query: str, knowledge_bases: Sequence[str], tenant_id: str, *,
                          top_k: int = defaults.DEFAULT_RERANK_TOP_K) -> list[SearchResult]:
    """The reranked passages of `knowledge_bases` (names or ids) for `query`; a base the tenant
    may not read is reported as missing (RetrievalError), as any unknown base."""
    if not query.strip():
        return []
    kb_ids = await asyncio.to_thread(kb_ids_of, stack, knowledge_bases, tenant_id)
    hits = await stack.searcher.search(SearchParams(query=query[:QUERY_LIMIT], knowledge_base_ids=kb_ids, tenant_id=tenant_id))
    return await rerank_results(query, hits, reranker, threshold=defaults.DEFAULT_RERANK_THRESHOLD, top_k=top_k, scoped=False)


def kb_ids_of(stack: Any, knowledge_bases: Sequence[str], tenant_id: str) -> list[str]:
    """Names or ids as ids the tenant may read (a base it may not read is reported as missing)."""
    return [stack.knowledge_bases.resolve(kb, tenant_id).id for kb in knowledge_bases]
