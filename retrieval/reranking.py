"""Rerank helpers shared by the chat pipeline, agent search tools and the search API.

Seed: rerank.go (passage cleaning and enrichment, threshold rules, composite score, FAQ boost)
and internal/reranking SelectMMR (diversity with an inverted token index).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ragline import defaults
from ragline.contracts.passages import ChunkType, SearchResult
from ragline.models.rerank import Reranker, RerankError
from ragline.retrieval.rerank_limits import passage_max_chars
from ragline.retrieval.searchutil import tokenize_simple
from ragline.retrieval.vision_rerank import SCORED_BY, VisionReranker, picture_scores

WEB_SOURCE = "web_search"

_FENCE = re.compile(r"^\s*(```|~~~)[^\n]*$", re.MULTILINE)
_MATH_FENCE = re.compile(r"\$\$")
_HTML_TAG = re.compile(r"<[^>\n]+>")
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_BARE_URL = re.compile(r"https?://\S+")
_TABLE_SEPARATOR = re.compile(r"^[ \t]*\|?[ \t]*:?-{2,}:?[ \t]*(\|[ \t]*:?-{2,}:?[ \t]*)*\|?[ \t]*$", re.MULTILINE)
_TABLE_ROW = re.compile(r"^[ \t]*\|(.+)\|[ \t]*$", re.MULTILINE)
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+", re.MULTILINE)
_QUOTE = re.compile(r"^\s*>+\s?", re.MULTILINE)
_BOLD = re.compile(r"(\*\*|__)(.+?)\1")
_LIST = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+", re.MULTILINE)
_BLANK_LINES = re.compile(r"\n\s*\n+")


def clean_passage(text: str) -> str:
    """cleanPassageForRerank: Markdown structure is noise to a rerank model; its words are not.

    Code and formula fences go but their text stays (a pure-code chunk must not clean to nothing).
    """
    text = _FENCE.sub("", text)
    text = _MATH_FENCE.sub("", text)
    text = _IMAGE.sub("", text)
    text = _HTML_TAG.sub("", text)
    text = _LINK.sub(r"\1", text)
    text = _BARE_URL.sub("", text)
    text = _TABLE_SEPARATOR.sub("", text)
    text = _TABLE_ROW.sub(lambda m: ", ".join(cell.strip() for cell in m.group(1).split("|")), text)
    text = _HEADING.sub("", text)
    text = _QUOTE.sub("", text)
    text = _BOLD.sub(r"\2", text)
    text = _LIST.sub("", text)
    return _BLANK_LINES.sub("\n", text).strip()


def enriched_passage(result: SearchResult, max_chars: int | None = None) -> str:
    """getEnrichedPassage: cleaned text plus image captions/OCR and generated questions, no repeats."""
    parts = [clean_passage(result.content)]
    extras: list[str] = []
    for image in result.metadata.get("images", []) or []:
        if isinstance(image, dict):
            extras += [str(image.get("caption") or ""), str(image.get("ocr_text") or "")]
    extras += [str(q) for q in result.metadata.get("generated_questions", []) or []]
    for extra in extras:
        extra = extra.strip()
        if extra and extra not in parts[0] and extra not in parts[1:]:
            parts.append(extra)
    passage = "\n".join(parts)
    return passage[:max_chars] if max_chars else passage


def is_web(result: SearchResult) -> bool:
    return result.metadata.get("source") == WEB_SOURCE


def is_faq(result: SearchResult) -> bool:
    return result.chunk_type == ChunkType.FAQ


def is_graph_hit(result: SearchResult) -> bool:
    return result.metadata.get("source") == "graph"


@dataclass(frozen=True)
class Scored:
    result: SearchResult
    model_score: float


def filter_by_threshold(scored: Sequence[Scored], threshold: float, keep_top1_min: float) -> list[Scored]:
    """The seed's threshold rules, best first.

    Pass the threshold; if nothing does and the threshold is above 0.3, retry once at
    threshold*0.7 (never below 0.3); if still nothing, keep the top-1 when it reaches
    `keep_top1_min` (0.15, or 0 for a search the user scoped to documents or tags).
    """
    ranked = sorted(scored, key=lambda s: s.model_score, reverse=True)
    kept = [s for s in ranked if s.model_score >= threshold]
    if not kept and threshold > defaults.RERANK_RETRY_FLOOR:
        lowered = max(threshold * defaults.RERANK_RETRY_FACTOR, defaults.RERANK_RETRY_FLOOR)
        kept = [s for s in ranked if s.model_score >= lowered]
    if not kept and ranked and ranked[0].model_score >= keep_top1_min:
        kept = [ranked[0]]
    return kept


IMAGE_CHUNK_TYPES = (ChunkType.IMAGE_OCR, ChunkType.IMAGE_CAPTION, ChunkType.IMAGE_VECTOR)


def image_text(result: SearchResult) -> str:
    """The OCR text an image hit carries (its ImageInfo, else an image_ocr chunk's own content)."""
    texts = [str(image.get("ocr_text") or "") for image in result.metadata.get("images", []) or [] if isinstance(image, dict)]
    return "\n".join(t for t in texts if t) or (result.content if result.chunk_type == ChunkType.IMAGE_OCR else "")


def keep_image_hits(scored: Sequence[Scored], kept: Sequence[Scored], vector_threshold: float) -> list[Scored]:
    """The seed's rule for image hits a text reranker turned down (internal/reranking/image.go).

    An image with OCR >= 200 characters is text and stood or fell by the threshold like text. A
    pictorial one (less OCR) whose own vector score was at least max(vector threshold, 0.25) is
    kept anyway, at most 2, best vector score first, marked kept_by=image_vector: the reranker
    only saw its words, not the picture. Kept even when no text passed.
    """
    passed = {s.result.id for s in kept}
    floor = max(vector_threshold, defaults.RERANK_IMAGE_VECTOR_FLOOR)
    pictures = [s for s in scored if s.result.id not in passed and s.result.chunk_type in IMAGE_CHUNK_TYPES
                and len(image_text(s.result)) < defaults.RERANK_IMAGE_OCR_MIN_CHARS and (s.result.vector_score or 0.0) >= floor]
    pictures.sort(key=lambda s: s.result.vector_score or 0.0, reverse=True)
    return [Scored(s.result.model_copy(update={"metadata": {**s.result.metadata, "kept_by": "image_vector"}}), s.model_score)
            for s in pictures[: defaults.RERANK_IMAGE_KEEP_MAX]]


def composite_score(model_score: float, base_score: float, web: bool) -> float:
    """0.6*model + 0.3*base + 0.1*source weight (web 0.95, else 1.0), clamped to [0, 1]."""
    source_weight = defaults.WEB_SOURCE_WEIGHT if web else 1.0
    value = (
        defaults.COMPOSITE_MODEL_WEIGHT * model_score
        + defaults.COMPOSITE_BASE_WEIGHT * base_score
        + defaults.COMPOSITE_SOURCE_WEIGHT * source_weight
    )
    return min(max(value, 0.0), 1.0)


def with_composite(scored: Scored) -> SearchResult:
    """The result rescored; graph hits have no search score, so the model score is their base."""
    result = scored.result
    base = scored.model_score if is_graph_hit(result) else result.score
    composite = composite_score(scored.model_score, base, is_web(result))
    metadata = {**result.metadata, "base_score": base, "model_score": scored.model_score, "composite_score": composite}
    return result.model_copy(update={"score": composite, "metadata": metadata})


def apply_faq_boost(results: list[SearchResult], boost: float) -> list[SearchResult]:
    """FAQ hits times the boost, not capped at 1.0: a cap would tie every strong FAQ at 1.0."""
    if boost <= 1.0:
        return results
    return [
        r.model_copy(update={"score": r.score * boost, "metadata": {**r.metadata, "faq_boosted": True}}) if is_faq(r) else r
        for r in results
    ]


def select_mmr(results: Sequence[SearchResult], k: int, lam: float = defaults.MMR_LAMBDA) -> list[SearchResult]:
    """SelectMMR: mmr = λ·relevance − (1−λ)·max Jaccard redundancy with what is already chosen.

    Each passage is tokenised once; an inverted index (token -> candidates) means a newly chosen
    passage only updates the candidates that share a token with it. Ties keep input order.
    """
    if k <= 0 or not results:
        return []
    if k == 1:  # the shortcut: no cleaning, no tokens, no index
        return [max(results, key=lambda r: r.score)]
    token_sets = [set(tokenize_simple(enriched_passage(r))) for r in results]
    postings: dict[str, list[int]] = {}
    for index, tokens in enumerate(token_sets):
        for token in tokens:
            postings.setdefault(token, []).append(index)
    redundancy = [0.0] * len(results)
    remaining = list(range(len(results)))
    chosen: list[int] = []
    while remaining and len(chosen) < k:
        best = max(remaining, key=lambda i: (lam * results[i].score - (1 - lam) * redundancy[i], -i))
        remaining.remove(best)
        chosen.append(best)
        shared: dict[int, int] = {}
        for token in token_sets[best]:
            for other in postings[token]:
                shared[other] = shared.get(other, 0) + 1
        for other, inter in shared.items():
            union = len(token_sets[best]) + len(token_sets[other]) - inter
            redundancy[other] = max(redundancy[other], inter / union if union else 0.0)
    return [results[i] for i in chosen]


# --- the whole chain, shared by the rerank stage and the search API (seed: PluginRerank) ---


def candidates(results: Sequence[SearchResult]) -> list[SearchResult]:
    return sorted(results, key=lambda r: r.score, reverse=True)[: defaults.RERANK_MAX_CANDIDATES]


async def model_scores(reranker: Reranker, query: str, results: list[SearchResult]) -> tuple[list[Scored], set[str]]:
    """The model's scores, and the ids of the image hits it judged by their pictures (a vision
    reranker); a vision call that fails, or has no picture to see, is made again as text."""
    limit = passage_max_chars(reranker.model, query)  # the model's own input window, not a fixed size
    passages = [enriched_passage(r, limit) for r in results]
    if isinstance(reranker, VisionReranker) and (seen := await picture_scores(reranker, query, results, passages)):
        scores, pictured = seen
        return [Scored(by_picture(results[s.index]) if results[s.index].id in pictured else results[s.index], s.score)
                for s in scores], pictured
    return [Scored(results[s.index], s.score) for s in await reranker.rerank(query, passages)], set()


def by_picture(result: SearchResult) -> SearchResult:
    return result.model_copy(update={"metadata": {**result.metadata, SCORED_BY: "image"}})


def passthrough_scores(results: list[SearchResult]) -> list[Scored]:
    """No model: the search score stands in for the model score."""
    return [Scored(r, r.score) for r in results]


async def rerank_results(query: str, results: Sequence[SearchResult], reranker: Reranker | None, *, threshold: float,
                         top_k: int, scoped: bool, faq_boost: float | None = None,
                         vector_threshold: float = defaults.DEFAULT_VECTOR_THRESHOLD) -> list[SearchResult]:
    """Model scores (or search scores without a model, or when it fails), the threshold rules,
    composite scores, the FAQ boost when given, then MMR down to `top_k`. A vision reranker judges
    image_vector hits by their pictures (vision_rerank.py); a text one leaves them the image rule.

    `scoped`: the user narrowed the search to documents or tags, so their best hit is kept
    whatever its score (top-1 minimum 0 instead of RERANK_FALLBACK_MIN_SCORE).
    """
    pool = candidates(results)
    kept: list[Scored]
    pictures: list[Scored] = []
    if reranker is None:
        kept = passthrough_scores(pool)
    else:
        try:
            scored, pictured = await model_scores(reranker, query, pool)
            kept = filter_by_threshold(scored, threshold, 0.0 if scoped else defaults.RERANK_FALLBACK_MIN_SCORE)
            # a picture the model saw stood or fell by the threshold: the text reranker's rule is not for it
            pictures = keep_image_hits([s for s in scored if s.result.id not in pictured], kept, vector_threshold)
        except RerankError:
            kept = passthrough_scores(pool)
    ranked = [with_composite(s) for s in kept]
    if faq_boost is not None:
        ranked = apply_faq_boost(ranked, faq_boost)
    ranked.sort(key=lambda r: r.score, reverse=True)
    return select_mmr(ranked, top_k) + [with_composite(s) for s in pictures]  # after the ranked ones, outside top_k
