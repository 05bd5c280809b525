"""memory_affinity: nudge documents this caller has cited before (seed: memory_affinity.go).

The innermost layer of the chunk_rerank chain, run after rerank. A document cited in at least two
earlier answers of the conversation gets a weight growing with the log of its citation count,
at most x1.15: enough to break near-ties, never enough to lift a poor match.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage
from langgraph.runtime import Runtime

from ragline import defaults
from ragline.graph.context import RunContext
from ragline.graph.state import PipelineState
from ragline.retrieval.types import SearchResult

_CITED_DOCUMENT = re.compile(r"<kb\b[^>]*\bknowledge_id=\"([^\"]+)\"")


def citation_counts(messages: Sequence[AnyMessage]) -> Counter[str]:
    """How often each document was cited inline in earlier answers (kb tags in the stored text)."""
    counts: Counter[str] = Counter()
    for message in messages:
        if isinstance(message, AIMessage) and isinstance(message.content, str):
            counts.update(set(_CITED_DOCUMENT.findall(message.content)))
    return counts


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


async def memory_affinity(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Weight rerank results by how often the conversation cited their documents."""
    counts = citation_counts(state.get("messages", []))
    if not counts:
        return {}
    return {"rerank_results": apply_affinity(list(state.get("rerank_results", [])), counts)}
