"""Each chunk's place in its document's text: character offsets (start, end) and, for a PDF, its pages.

The chunker cuts, strips and re-joins pieces of the text (and repeats a long table's header on
each part), so a chunk is not always one exact substring of it. Chunks come in reading order,
so each is looked for after the previous one's start: as a whole first, else line by line (each
line after the last), the span running from its first line to its last. A table part whose
header repeats the table's is placed at its own first row. A chunk that cannot be found within
LOCATE_SLACK_CHARS past where it should be gets no offsets rather than wrong ones.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import Any

from ragline import defaults
from ragline.retrieval.locations import END, HEADINGS, PAGES, START

Span = tuple[int, int]


def locate_chunks(text: str, contents: Sequence[str]) -> list[Span | None]:
    """The span of each chunk in `text`, chunks given in reading order."""
    spans: list[Span | None] = []
    floor, reach = 0, 0
    for content in contents:
        span = locate(text, content, floor, max(floor, reach) + len(content) + defaults.LOCATE_SLACK_CHARS)
        spans.append(span)
        if span is not None:
            floor, reach = span[0] + 1, span[1]
    return spans


def locate(text: str, content: str, floor: int, limit: int) -> Span | None:
    """Where `content` stands in `text[floor:limit]`, whole or line by line."""
    at = text.find(content, floor, limit)
    if at >= 0:
        return at, at + len(content)
    lines = [line.strip() for line in content.split("\n") if line.strip()]
    walked = _walk(text, lines, floor, limit)
    if _is_table(lines) and (walked is None or bool(text[walked[1][1] + len(lines[1]) : walked[1][2]].strip())):
        walked = _walk(text, lines[2:], floor, limit)  # a later part of a long table: its header is the table's own, above
    return (walked[1][0], walked[0]) if walked else None


def _walk(text: str, lines: list[str], floor: int, limit: int) -> tuple[int, list[int]] | None:
    """Each line found after the one before: (end of the last, start of each); None if one is missing."""
    starts, cursor = [], floor
    for line in lines:
        at = text.find(line, cursor, limit)
        if at < 0:
            return None
        starts.append(at)
        cursor = at + len(line)
    return (cursor, starts) if starts else None


def _is_table(lines: list[str]) -> bool:
    """A Markdown table with a header, its rule and at least one row."""
    return len(lines) >= 3 and lines[0].startswith("|") and set(lines[1].replace("|", "").strip()) <= set("-: ")


def pages_of(span: Span, page_starts: Sequence[int]) -> list[int]:
    """The pages (first page 1) whose text the span touches."""
    if not page_starts:
        return []
    first = max(bisect_right(page_starts, span[0]), 1)
    last = max(bisect_right(page_starts, max(span[1] - 1, span[0])), first)
    return list(range(first, last + 1))


def location_metadata(headings: list[str], span: Span | None, page_starts: Sequence[int]) -> dict[str, Any]:
    """A chunk's location as its metadata records it (retrieval/locations.py reads it back)."""
    metadata: dict[str, Any] = {HEADINGS: headings}
    if span is not None:
        metadata[START], metadata[END] = span
        if page_starts:
            metadata[PAGES] = pages_of(span, page_starts)
    return metadata
