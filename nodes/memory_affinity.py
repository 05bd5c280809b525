"""memory_affinity: nudge documents this caller has cited before (seed: memory_affinity.go).

The innermost layer of the chunk_rerank chain, run after rerank. A document cited in at least two
earlier answers of this caller, in any of their sessions, gets a weight growing with the log of
its citation count, at most x1.15: enough to break near-ties, never enough to lift a poor match.
Past answers come from the caller's citation ledger (memory/citations.py, written when a turn
ends) and from this thread's own messages (hosts that keep no ledger), counted once by message id.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage
from langgraph.runtime import Runtime

from ragline import defaults
from ragline.contracts.context import RunContext, context_of
from ragline.contracts.passages import SearchResult
from ragline.contracts.state import PipelineState
from ragline.memory.citations import CitationLedger, cited_documents, count_citations
from ragline.services import services_of

log = logging.getLogger(__name__)


def thread_answers(messages: Sequence[AnyMessage]) -> dict[str, set[str]]:
    """The documents each earlier answer of this thread cites, by message id."""
    return {
        message.id or f"#{index}": cited_documents(message.content)
        for index, message in enumerate(messages)
        if isinstance(message, AIMessage) and isinstance(message.content, str)
    }


def citation_counts(messages: Sequence[AnyMessage]) -> Counter[str]:
    """How often each document was cited inline in earlier answers (kb tags in the stored text)."""
    return count_citations(thread_answers(messages))


def affinity_factor(citations: int) -> float:
    if citations < defaults.MEMORY_AFFINITY_MIN_CITATIONS:
        return 1.0
    return min(defaults.MEMORY_AFFINITY_MAX_FACTOR, 1.0 + defaults.MEMORY_AFFINITY_LOG_WEIGHT * math.log2(citations))


def apply_affinity(results: list[SearchResult], counts: Counter[str]) -> list[SearchResult]:
    boosted = []
    for result in results:
        factor = affinity_factor(counts.get(result.knowledge_id, 0))
        if factor > 1.0:
            result = result.model_copy(update={"score": result.score * factor, "metadata": {**result.metadata, "memory_affinity": factor}})
        boosted.append(result)
    return sorted(boosted, key=lambda r: r.score, reverse=True)  # stable: ties keep rerank order


async def _ledger_answers(runtime: Runtime[RunContext]) -> dict[str, list[str]]:
    """The caller's answers in all their sessions; an unreadable ledger only loses the nudge."""
    context = context_of(runtime)
    try:
        return await CitationLedger(services_of(runtime).memory_store).answers(context.tenant_id, context.user_id)
    except Exception as exc:
        log.warning("the citation ledger is unreadable, memory affinity uses this thread only: %s", exc)
        return {}


async def memory_affinity(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Weight rerank results by how often this caller's answers, in every session, cited their documents."""
    results = list(state.get("rerank_results", []))
    if not results:
        return {}
    answers: dict[str, Any] = {**await _ledger_answers(runtime), **thread_answers(state.get("messages", []))}
    counts = count_citations(answers)
    if not counts:
        return {}
    return {"rerank_results": apply_affinity(results, counts)}
