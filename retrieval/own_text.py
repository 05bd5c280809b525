"""Where a passage's own hit text is, once merge step 7 lent it its neighbours' text.

A short hit borrows the end of the chunk before it and the start of the one after it (the seed's
merge_expand.go). That text is context, not evidence: a tight context budget (the local model's,
generation/budget.py) takes it back before it drops another passage. The span of the hits' own
text rides in the passage's metadata, kept right through the merge steps that change the text
after step 7 (joining neighbours, pruning image links); a step that cannot keep it drops it, and
the passage is then all its own.
"""

from __future__ import annotations

from collections.abc import Callable

from ragline.contracts.passages import SearchResult

OWN_SPAN = "own_span"


def own_span(result: SearchResult) -> tuple[int, int] | None:
    span = result.metadata.get(OWN_SPAN)
    if isinstance(span, list | tuple) and len(span) == 2 and all(isinstance(i, int) for i in span) and 0 <= span[0] <= span[1]:
        return span[0], span[1]
    return None


def _with(result: SearchResult, content: str, span: tuple[int, int] | None, **metadata: object) -> SearchResult:
    kept = {key: value for key, value in result.metadata.items() if key != OWN_SPAN}
    own = {OWN_SPAN: list(span)} if span is not None and span != (0, len(content)) else {}
    return result.model_copy(update={"content": content, "metadata": {**kept, **metadata, **own}})


def lent(result: SearchResult, content: str) -> SearchResult:
    """`result` with `content`: its own text and what its neighbours lent it around that."""
    if content == result.content:
        return result
    start = content.find(result.content)
    return _with(result, content, (start, start + len(result.content)) if start >= 0 else None, expanded=True)


def with_joined_span(metadata: dict[str, object], first: SearchResult, second: SearchResult, content: str) -> dict[str, object]:
    """`metadata` of the two passages joined into `content` (join_chunk_content), its own span from
    the first's own text to the end of the second's; none when neither borrowed, or one held the other."""
    kept = {key: value for key, value in metadata.items() if key != OWN_SPAN}
    first_span, second_span = own_span(first), own_span(second)
    if (first_span is None and second_span is None) or not (content.startswith(first.content) and content.endswith(second.content)):
        return kept
    start = first_span[0] if first_span else 0
    end = len(content) - len(second.content) + (second_span[1] if second_span else len(second.content))
    return {**kept, OWN_SPAN: [start, end]} if start <= end else kept


def rewritten(result: SearchResult, rewrite: Callable[[str], str]) -> SearchResult:
    """`result` with `rewrite` applied to its text, its own span found again in the new text."""
    content = rewrite(result.content)
    if content == result.content:
        return result
    span = own_span(result)
    if span is None:
        return result.model_copy(update={"content": content})
    own = rewrite(result.content[span[0] : span[1]]).strip()
    start = content.find(own) if own else -1
    return _with(result, content, (start, start + len(own)) if start >= 0 else None)


def unexpanded(result: SearchResult) -> SearchResult:
    """The passage without the text its neighbours lent it (itself when it borrowed none)."""
    span = own_span(result)
    if span is None:
        return result
    metadata = {key: value for key, value in result.metadata.items() if key not in (OWN_SPAN, "expanded")}
    return result.model_copy(update={"content": result.content[span[0] : span[1]], "metadata": metadata})
