"""How many context tokens an answer may carry, and which passages fit (sized for small models).

A local model prefills ~50-100 tokens/s on two cores, so each retrieved passage it reads costs
seconds before the first answer token, and a 0.5B model answers best from the one best passage:
on XQuAD its token F1 was 0.54 with 250 tokens, 0.48 with 320, 0.45 with 400 and 0.43 with all
five passages (60 questions, ragline eval --answers). Passages are taken in rank order while they fit the budget; the first
one always goes in, cut to the budget if it alone is larger. One paragraph is too little for a
question that joins facts (multi-hop: each hop is another passage) and for a second passage as
good as the first, so those may stretch the budget (needed_beyond_budget). Within the budget, a
passage whose gate evidence is far below the best's is not worth its prefill (close_to_best): the
sample's first-turn prompt p50 went from 322 to 259 tokens and its first token from 2.6 s to 2.2 s
(benchmarks/answer_latency.py), with XQuAD F1 0.744 and CMRC 0.621 as before and MuSiQue 0.189 to
0.185 (its multi-hop questions join facts: their weak hops stay). Remote models have no budget
unless one is configured: their prefill is fast and their windows are large.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ragline import defaults
from ragline.contracts.passages import SearchResult
from ragline.retrieval.own_text import unexpanded
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


def close_to_best(result: SearchResult, best: float | None) -> bool:
    """Whether the passage's gate evidence is at least CONTEXT_CLOSE_SHARE of the best hit's (true
    when the gate gave no scores: nothing to compare)."""
    relevance = result.metadata.get("relevance")
    if best is None or not isinstance(relevance, int | float):
        return True
    return relevance >= defaults.CONTEXT_CLOSE_SHARE * best


def needed_beyond_budget(result: SearchResult, kept: list[SearchResult], *, joins_facts: bool) -> bool:
    """A passage past the plain budget that the question still needs: one whose own evidence
    passed the relevance gate's full bar (close to the first's, not just half of it), or, for a
    question joining facts, the first passage from a document the context does not hold yet."""
    relevance = result.metadata.get("relevance")
    if isinstance(relevance, int | float) and relevance >= defaults.RELEVANCE_MIN_SCORE:
        return True
    return joins_facts and all(result.knowledge_id != other.knowledge_id for other in kept)


async def fit_budget(results: list[SearchResult], budget: int, count: TokenCounter, *,
                     joins_facts: bool = False) -> list[SearchResult]:
    """The leading results whose passages fit `budget` tokens together, and past it, up to
    CONTEXT_BUDGET_STRETCH times the budget, the passages the question needs (needed_beyond_budget).
    Passages are chosen by their own text; the text merge step 7 lent them from their neighbours
    goes back in, in rank order, only where the budget still has room: another passage that
    passed the gate is evidence, the next section of a manual only context."""
    if not results:
        return []
    own = [unexpanded(result) for result in results]
    sizes = await count([result.content for result in own] + [result.content for result in results])
    own_sizes, full_sizes = sizes[: len(results)], sizes[len(results) :]
    chosen, used = _choose(own, own_sizes, budget, joins_facts=joins_facts)
    kept = []
    for index, passage in chosen:
        extra = full_sizes[index] - own_sizes[index]
        # chosen whole (not cut to the budget), and it did borrow: the lent text back if it still fits
        if passage is own[index] and results[index] is not own[index] and used + extra <= budget:
            passage, used = results[index], used + extra
        kept.append(passage)
    return kept


def _choose(results: list[SearchResult], sizes: list[int], budget: int, *,
            joins_facts: bool) -> tuple[list[tuple[int, SearchResult]], int]:
    """(index, passage) of each result that goes in, and the tokens they take."""
    kept: list[tuple[int, SearchResult]] = []
    used, full = 0, False
    stretched = budget * defaults.CONTEXT_BUDGET_STRETCH
    best = max((r for result in results if isinstance(r := result.metadata.get("relevance"), int | float)), default=None)
    for index, (result, size) in enumerate(zip(results, sizes, strict=True)):
        if not kept and size > budget:
            kept.append((index, _cut(result, size, budget)))
            used, full = budget, True
        elif kept and not joins_facts and not close_to_best(result, best):
            continue  # evidence far below the best's: seconds of prefill for a passage the question does not need
        elif not full and used + size <= budget:
            kept.append((index, result))
            used += size
        elif used + size <= stretched and needed_beyond_budget(result, [k for _, k in kept], joins_facts=joins_facts):
            kept.append((index, result))
            used += size
            full = True  # in rank order: a passage that did not fit is never passed by a weaker one
        else:
            full = True
    return kept, used
