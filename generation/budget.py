"""How many context tokens an answer may carry, and which passages fit (sized for small models).

A local model prefills ~50-100 tokens/s on two cores, so each retrieved passage it reads costs
seconds before the first answer token, and a 0.5B model answers best from the one best passage:
on XQuAD its token F1 was 0.54 with 250 tokens, 0.48 with 320, 0.45 with 400 and 0.43 with all
five passages (60 questions, ragline eval --answers). Passages are taken in rank order while they fit the budget; the first
one always goes in, cut to the budget if it alone is larger. Remote models have no budget unless
one is configured: their prefill is fast and their windows are large.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ragline import defaults
from ragline.retrieval.types import SearchResult
from ragline.settings import Settings

TokenCounter = Callable[[list[str]], Awaitable[list[int]]]


def context_budget(settings: Settings, *, local: bool) -> int | None:
    """The configured budget, else the local model's default, else none."""
    if settings.context_token_budget is not None:
        return settings.context_token_budget or None  # 0 turns the budget off
    return defaults.LOCAL_CONTEXT_TOKEN_BUDGET if local else None


def _cut(result: SearchResult, tokens: int, budget: int) -> SearchResult:
    """The passage shortened in proportion to its token count (a cut mid-word beats an empty prompt)."""
    keep = max(1, len(result.content) * budget // max(tokens, 1))
    return result.model_copy(update={"content": result.content[:keep].rstrip() + " …",
                                     "metadata": {**result.metadata, "cut_to_budget": True}})


async def fit_budget(results: list[SearchResult], budget: int, count: TokenCounter) -> list[SearchResult]:
    """The leading results whose passages fit `budget` tokens together."""
    if not results:
        return []
    sizes = await count([result.content for result in results])
    kept: list[SearchResult] = []
    used = 0
    for result, size in zip(results, sizes, strict=True):
        if used + size > budget:
            if not kept:
                kept.append(_cut(result, size, budget))
            break
        kept.append(result)
        used += size
    return kept
