"""The eight steps of chunk_merge as small functions (seed: merge.go, merge_history.go,
merge_expand.go, merge_faq.go, merge_overlap.go). The chunk_merge stage runs them in order."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any, Protocol

from ragline import defaults
from ragline.contracts.passages import ChunkType, SearchResult, merge_search_results
from ragline.retrieval.catalog import Catalog
from ragline.retrieval.locations import joined_location
from ragline.retrieval.merge_images import absorb_image_hit, merge_image_info, prune_markdown_images, resolve_image_chains
from ragline.retrieval.own_text import lent, with_joined_span
from ragline.retrieval.searchutil import (
    is_content_contained,
    join_chunk_content,
    overlap_coefficient,
    tokenize_simple,
)

HISTORY_MATCH = "history"


class PastTurn(Protocol):
    """An earlier round of the conversation (the graph's HistoryTurn): its stored references."""

    @property
    def references(self) -> Sequence[dict[str, Any]]: ...


def choose_input(rerank_results: Sequence[SearchResult], search_results: Sequence[SearchResult], top_k: int) -> list[SearchResult]:
    """Step 1: rerank results, else search results by score cut to top-k (no DB work for the rest)."""
    if rerank_results:
        return list(rerank_results)
    return sorted(search_results, key=lambda r: r.score, reverse=True)[:top_k]


def deduplicate(results: Sequence[SearchResult]) -> list[SearchResult]:
    """Step 2 (and the final pass): chunk id + content signature, first occurrence wins."""
    return merge_search_results([], list(results))


def history_references(history: Sequence[PastTurn], query: str) -> list[SearchResult]:
    """Step 3: references of the last round that had any, if they cover enough of the question."""
    last = next((turn for turn in reversed(history) if turn.references), None)
    if last is None:
        return []
    query_tokens = set(tokenize_simple(query))
    injected: list[SearchResult] = []
    for raw in last.references:
        try:
            ref = SearchResult.model_validate(raw)
        except ValueError:
            continue
        if overlap_coefficient(query_tokens, set(tokenize_simple(ref.content))) < defaults.HISTORY_REF_MIN_OVERLAP:
            continue
        metadata = {**ref.metadata, "match_type": HISTORY_MATCH}
        injected.append(ref.model_copy(update={"score": ref.score * defaults.HISTORY_REF_SCORE_FACTOR, "metadata": metadata}))
        if len(injected) == defaults.HISTORY_REF_MAX:
            break
    return injected


def resolve_parents(results: Sequence[SearchResult], catalog: Catalog) -> list[SearchResult]:
    """Step 4: a child chunk brings its parent's text as context (one batched lookup); an image hit
    the text around the image (retrieval/merge_images.py); stored images nobody found are pruned."""
    parent_ids = [r.parent_chunk_id for r in results if r.parent_chunk_id]
    parents = catalog.get_chunks(parent_ids) if parent_ids else {}
    resolved = []
    for result in results:
        parent = parents.get(result.parent_chunk_id or "")
        if parent is not None and parent.content:
            metadata = {**result.metadata, "child_content": result.content, "parent_chunk_id": parent.id}
            result = result.model_copy(update={"content": parent.content, "metadata": metadata})
        resolved.append(result)
    return prune_markdown_images(resolve_image_chains(resolved, catalog))


def _joinable(a: SearchResult, b: SearchResult) -> bool:
    return b.chunk_index - a.chunk_index == 1 or is_content_contained(b.content, a.content) or is_content_contained(a.content, b.content)


def merge_sequential(results: Sequence[SearchResult]) -> list[SearchResult]:
    """Step 5: per document and chunk type, in chunk order, join neighbouring or contained chunks."""
    groups: dict[tuple[str, str], list[SearchResult]] = defaultdict(list)
    for result in results:
        groups[(result.knowledge_id, str(result.chunk_type))].append(result)
    merged: list[SearchResult] = []
    for group in groups.values():
        group.sort(key=lambda r: (r.chunk_index, r.id))
        current = group[0]
        for following in group[1:]:
            if str(current.chunk_type) == ChunkType.TEXT and _joinable(current, following):
                sub_ids = [*current.metadata.get("sub_chunk_ids", [current.id]), following.id]
                content = join_chunk_content(current.content, following.content)
                metadata: dict[str, Any] = with_joined_span({**current.metadata, "sub_chunk_ids": sub_ids,
                                                             **joined_location(current.metadata, following.metadata)},
                                                            current, following, content)
                images = merge_image_info(current, following)
                if images:  # the joined text holds both chunks' images: keep every one's info, so none is pruned
                    metadata["images"] = images
                current = current.model_copy(update={
                    "content": content,
                    "score": max(current.score, following.score),
                    "chunk_index": following.chunk_index,  # the joined text now ends where `following` ends
                    "next_chunk_id": following.next_chunk_id,
                    "metadata": metadata,
                })
            else:
                merged.append(current)
                current = following
        merged.append(current)
    return sorted(merged, key=lambda r: r.score, reverse=True)


def fill_faq_answers(results: Sequence[SearchResult]) -> list[SearchResult]:
    """Step 6: an FAQ hit becomes 'Q: standard question' + 'Answer: answers'."""
    filled = []
    for result in results:
        question, answers = result.metadata.get("standard_question"), result.metadata.get("answers")
        if result.chunk_type == ChunkType.FAQ and question and answers:
            result = result.model_copy(update={"content": f"Q: {question}\nAnswer: " + "\n".join(map(str, answers))})
        filled.append(result)
    return filled


def expand_short_chunks(results: Sequence[SearchResult], catalog: Catalog) -> list[SearchResult]:
    """Step 7: a text chunk under 350 characters borrows its neighbours' text up to about 850.

    The hit itself stays whole; the remaining length is shared between the end of the previous
    chunk and the start of the next, and only neighbours of the same document count.
    """
    short = [r for r in results if r.chunk_type == ChunkType.TEXT and len(r.content) < defaults.SHORT_CHUNK_CHARS]
    neighbour_ids = [i for r in short for i in (r.pre_chunk_id, r.next_chunk_id) if i]
    neighbours = catalog.get_chunks(neighbour_ids) if neighbour_ids else {}
    expanded = []
    for result in results:
        if result in short:
            result = _expand(result, neighbours)
        expanded.append(result)
    return expanded


def _expand(result: SearchResult, neighbours: dict[str, Any]) -> SearchResult:
    before = neighbours.get(result.pre_chunk_id or "")
    after = neighbours.get(result.next_chunk_id or "")
    before_text = before.content if before is not None and before.knowledge_id == result.knowledge_id else ""
    after_text = after.content if after is not None and after.knowledge_id == result.knowledge_id else ""
    budget = max(defaults.EXPANDED_CHUNK_CHARS - len(result.content), 0)
    take_before = min(len(before_text), budget // 2 if after_text else budget)
    take_after = min(len(after_text), budget - take_before)
    prefix = before_text[len(before_text) - take_before :] if take_before else ""
    suffix = after_text[:take_after]
    if not prefix and not suffix:
        return result
    content = join_chunk_content(join_chunk_content(prefix, result.content), suffix) if suffix else join_chunk_content(prefix, result.content)
    return lent(result, content)


def remove_partial_overlaps(results: Sequence[SearchResult]) -> list[SearchResult]:
    """Step 8: drop the lower-scored of two near-duplicates (contained, or >= 85% shared tokens
    when their sizes are within 3x, so a long page never swallows a short chunk)."""
    ranked = sorted(results, key=lambda r: r.score, reverse=True)
    tokens = [set(tokenize_simple(r.content)) for r in ranked]
    kept: list[int] = []
    for index, result in enumerate(ranked):
        keeper = next((other for other in kept if _near_duplicate(result.content, ranked[other].content, tokens[index], tokens[other])), None)
        if keeper is None:
            kept.append(index)
        else:  # a dropped image hit leaves its image with the keeper
            ranked[keeper] = absorb_image_hit(ranked[keeper], result)
    return [ranked[i] for i in kept]


def _near_duplicate(content: str, kept_content: str, tokens: set[str], kept_tokens: set[str]) -> bool:
    if is_content_contained(content, kept_content):
        return True
    small, big = sorted((len(tokens), len(kept_tokens)))
    return bool(small) and big <= small * defaults.PARTIAL_OVERLAP_SIZE_RATIO and overlap_coefficient(tokens, kept_tokens) >= defaults.PARTIAL_OVERLAP_RATIO
