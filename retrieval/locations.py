"""Where a chunk stands in its document: its heading path, its PDF page(s), and the character
offsets (start, end) of its text in the document's parsed text (the text the catalog keeps for
the document and `GET .../documents/{id}/text` returns).

Ingestion writes these into each chunk's metadata (ingestion/locations.py); a reference carries
them as its `location`, and a passage joined from neighbouring chunks spans them all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

HEADINGS = "headings"  # chunk metadata keys
PAGES = "pages"
START = "start"
END = "end"
PAGE_STARTS = "page_starts"  # a PDF document's metadata: where each page begins in its text


class ChunkLocation(BaseModel):
    """A passage's place in its document; what is unknown is left empty (pages outside PDFs)."""

    model_config = ConfigDict(frozen=True)

    pages: list[int] = Field(default_factory=list, description="The PDF page(s) the passage's text came from, first page 1.")
    headings: list[str] = Field(default_factory=list, description="The heading path above the passage, outermost first.")
    start: int | None = Field(None, description="Offset of the passage's first character in the document's text.")
    end: int | None = Field(None, description="Offset just past the passage's last character in the document's text.")


def location_of(metadata: Mapping[str, Any]) -> ChunkLocation | None:
    """The location a chunk's metadata records; None when it records none (an older chunk, a web page)."""
    pages = [int(p) for p in metadata.get(PAGES) or [] if isinstance(p, int)]
    headings = [str(h) for h in metadata.get(HEADINGS) or [] if isinstance(h, str)]
    start, end = metadata.get(START), metadata.get(END)
    span = isinstance(start, int) and isinstance(end, int) and 0 <= start <= end
    if not (pages or headings or span):
        return None
    return ChunkLocation(pages=pages, headings=headings, start=start if span else None, end=end if span else None)


def joined_location(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    """The location metadata of two chunks' texts joined into one passage: from the earlier start
    to the later end, every page of either (the heading path stays the first chunk's). No span
    when either chunk has none: half a span would point at part of the passage only."""
    if location_of(first) is None and location_of(second) is None:
        return {}
    a, b = location_of(first) or ChunkLocation(), location_of(second) or ChunkLocation()
    pages = sorted({*a.pages, *b.pages})
    if a.start is None or a.end is None or b.start is None or b.end is None:
        return {PAGES: pages, START: None, END: None}
    return {PAGES: pages, START: min(a.start, b.start), END: max(a.end, b.end)}
