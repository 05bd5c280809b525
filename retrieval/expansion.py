"""Query expansion: local keyword variants of a query, searched keyword-only when recall is low.

Replaces the seed's query_expansion.go (PluginSearch, CHUNK_SEARCH). No LLM is called: variants
come from the query itself (stop words removed, word order changed, key phrases picked out).
Chinese runs go whole to jieba `cut_for_search`, mixed Chinese/Latin/digit text is split where
the script switches (never one token per character), and stop-word and length filters count
characters, not bytes. Each (variant x search target) is one keyword-only HybridSearch, at most
16 in flight: the vector side of a variant is almost the original query, so nothing is embedded
again. Variants search with the keyword threshold relaxed to 0.8x and a top-k of
max(embedding top-k, rerank top-k) * 2. Targets with keyword search off are never expanded.

The trigger (expansion enabled and fewer primary hits than the embedding top-k) belongs to the
chunk search node; this module only generates variants and runs their searches.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Protocol

import jieba

from ragline import defaults
from ragline.contracts.access import Principal
from ragline.contracts.passages import SearchResult
from ragline.retrieval.tokenizer import STOPWORDS, ensure_jieba, split_scripts, tokenize
from ragline.retrieval.types import KnowledgeBase, KnowledgeBaseType, SearchParams


class Searcher(Protocol):
    """What expansion needs from HybridSearcher: its search call and the KB lookup."""

    async def search(self, params: SearchParams) -> list[SearchResult]: ...

    def authorize(self, kb_ids: list[str], who: Principal) -> list[KnowledgeBase]: ...


# Question words carry no topic. They stay in the BM25 index's tokens (changing its stop list
# would make stored chunks disagree with queries), but a variant has no use for them.
QUESTION_WORDS = frozenset(
    ["what", "which", "who", "whom", "whose", "when", "where", "why", "how", "does", "do", "did", "can", "could", "would", "should", "must", "may", "might", "much", "many", "please", "tell", "explain", "describe", "哪里", "哪儿", "怎么样", "为何", "是否", "请问", "多少", "什么样", "有没有"]
)
_PUNCTUATION = re.compile(r"[^\w\s]+|_+")


def is_keyword(word: str) -> bool:
    """A word worth searching: no stop or question word, at least QUERY_EXPANSION_MIN_WORD_CHARS long.

    len() counts characters (code points), so a two-character Chinese word counts two, not six bytes.
    """
    return (word not in STOPWORDS and word not in QUESTION_WORDS
            and len(word) >= defaults.QUERY_EXPANSION_MIN_WORD_CHARS)


def query_words(query: str) -> list[str]:
    """Lower-cased words in query order, duplicates dropped: jieba `cut_for_search` words for
    Chinese runs, one word per Latin/digit run (a run ends where the script switches)."""
    ensure_jieba()
    words: list[str] = []
    for run, is_han in split_scripts(query.lower()):
        words.extend(jieba.cut_for_search(run) if is_han else [run])
    return list(dict.fromkeys(w.strip() for w in words if w.strip()))


def candidate_phrases(query: str) -> list[list[str]]:
    """Maximal runs of keywords: a stop word, punctuation or a script switch ends a phrase.

    Chinese runs are cut in jieba's precise mode here: search-mode words overlap ("共和" inside
    "共和国"), which would repeat words inside a phrase.
    """
    ensure_jieba()
    phrases: list[list[str]] = []
    for segment in _PUNCTUATION.split(query.lower()):
        current: list[str] = []
        previous_han: bool | None = None
        for run, is_han in split_scripts(segment):
            if previous_han is not None and is_han != previous_han:
                phrases.append(current)
                current = []
            previous_han = is_han
            for word in (jieba.lcut(run) if is_han else [run]):
                if is_keyword(word.strip()):
                    current.append(word.strip())
                else:
                    phrases.append(current)
                    current = []
        phrases.append(current)
    return [p for p in phrases if p]


def key_phrases(query: str) -> list[str]:
    """RAKE key phrases, best first: a word scores degree/frequency (how much of a longer phrase it
    is), a phrase the sum of its words; ties go to the longer phrase, then the earlier one."""
    candidates = list(dict.fromkeys(" ".join(p) for p in candidate_phrases(query)))
    freq: dict[str, int] = {}
    degree: dict[str, int] = {}
    for phrase in candidates:
        words = phrase.split()
        for word in words:
            freq[word] = freq.get(word, 0) + 1
            degree[word] = degree.get(word, 0) + len(words)
    score = {p: sum(degree[w] / freq[w] for w in p.split()) for p in candidates}
    position = {p: i for i, p in enumerate(candidates)}
    return sorted(candidates, key=lambda p: (-score[p], -len(p), position[p]))


def query_variants(query: str, max_variants: int = defaults.QUERY_EXPANSION_MAX_VARIANTS) -> list[str]:
    """Local rewrites of `query`, unique, the query itself excluded, at most `max_variants`, in
    this order: its keywords (stop words removed), the keywords reversed, the two best key
    phrases together, then each key phrase alone."""
    keywords = [w for w in query_words(query) if is_keyword(w)]
    if not keywords or max_variants <= 0:
        return []
    phrases = key_phrases(query)
    candidates = [" ".join(keywords), " ".join(reversed(keywords))]
    if len(phrases) > 2:
        candidates.append(" ".join(phrases[:2]))
    if len(phrases) > 1:
        candidates += phrases
    original = " ".join(query.lower().split())
    return [c for c in dict.fromkeys(candidates) if c != original][:max_variants]


def expansion_top_k(embedding_top_k: int, rerank_top_k: int) -> int:
    """Variants fetch max(embedding top-k, rerank top-k) * 2 hits."""
    return max(embedding_top_k, rerank_top_k, 1) * defaults.QUERY_EXPANSION_TOP_K_FACTOR


def variant_params(params: SearchParams, variant: str, top_k: int) -> SearchParams:
    """A keyword-only copy of a target's search: the variant as keyword text, threshold 0.8x.

    The original query stays `query` (FAQ negative-question filtering reads it); scoped searches
    that switched thresholds off keep them off.
    """
    threshold = 0.0 if params.disable_recall_thresholds else params.keyword_threshold * defaults.QUERY_EXPANSION_THRESHOLD_FACTOR
    return params.model_copy(update={
        "keyword_query": variant, "disable_vector": True, "query_embedding": None,
        "keyword_threshold": threshold, "match_count": top_k,
    })


def _keyword_searchable(searcher: Searcher, params: SearchParams) -> bool:
    """Keyword search is on for this target and at least one of its KBs has a keyword index."""
    if params.disable_keyword:
        return False
    kbs = searcher.authorize(params.knowledge_base_ids, params.who())
    return any(kb.type == KnowledgeBaseType.DOCUMENT for kb in kbs)


def plan_expansion(searcher: Searcher, params_for_target: Sequence[SearchParams], embedding_top_k: int,
                   rerank_top_k: int) -> list[SearchParams]:
    """Every (variant x target) keyword-only search, variants with an already planned bag of
    keyword tokens skipped: BM25 ignores word order, so such a search would repeat one already made."""
    top_k = expansion_top_k(embedding_top_k, rerank_top_k)
    planned: list[SearchParams] = []
    for params in params_for_target:
        if not _keyword_searchable(searcher, params):
            continue
        seen = {tuple(sorted(tokenize(params.keyword_query or params.query)))}
        for variant in query_variants(params.query):
            bag = tuple(sorted(tokenize(variant)))
            if bag and bag not in seen:
                seen.add(bag)
                planned.append(variant_params(params, variant, top_k))
    return planned


async def expand_search(searcher: Searcher, params_for_target: Sequence[SearchParams], embedding_top_k: int,
                        rerank_top_k: int) -> list[SearchResult]:
    """Keyword-only searches of every query variant on every target, at most 16 at once.

    `params_for_target` are the primary searches exactly as the caller made them (one per whole-KB
    group or scoped target). Returns the union of their hits, each chunk once with its best score,
    best first; [] when no target has keyword search on. The caller merges these after its primary
    results (primary hits keep their place) and decides when to call (the seed: expansion enabled
    and fewer primary hits than the embedding top-k).
    """
    planned = await asyncio.to_thread(plan_expansion, searcher, params_for_target, embedding_top_k, rerank_top_k)  # reads the catalog, tokenizes
    if not planned:
        return []
    gate = asyncio.Semaphore(defaults.QUERY_EXPANSION_MAX_CONCURRENCY)

    async def one(params: SearchParams) -> list[SearchResult]:
        async with gate:
            return await searcher.search(params)

    best: dict[str, SearchResult] = {}
    for batch in await asyncio.gather(*(one(p) for p in planned)):
        for result in batch:
            if result.id not in best or result.score > best[result.id].score:
                best[result.id] = result
    return sorted(best.values(), key=lambda r: -r.score)
