"""What `ragline ask` and `ragline chat` print: thinking dimmed, answer plain, citations as [n]."""

from __future__ import annotations

import re
from typing import Any, TextIO

from ragline.citations.plain import UNSUPPORTED_FOOTNOTE
from ragline.graph.events import ResponseType, StreamResponse

DIM, RESET = "\033[2m", "\033[0m"
UNSUPPORTED_NOTE = "[?] no passage of the knowledge base supports this sentence"
UNSEARCHED_NOTE = "(no knowledge base was searched: this answer is the model's own, not from your documents; add --kb NAME or --sample)"
_KB_TAG = re.compile(r"<(kb|web)\b([^>]*)/>")
_ATTRIBUTE = re.compile(r'(\w+)="([^"]*)"')


def place(location: dict[str, Any] | None) -> str:
    """Where a cited passage stands: its PDF page(s), else its heading path; "" when unknown."""
    if not location:
        return ""
    pages = location.get("pages") or []
    if pages:
        return f"p. {pages[0]}" if pages[0] == pages[-1] else f"pp. {pages[0]}-{pages[-1]}"
    return " > ".join(location.get("headings") or [])


class TerminalPrinter:
    """Renders events: thinking dimmed, answer plain, citations as [n] with their sources listed
    after the answer, errors on stderr. A source Ragline matched to a sentence the model left
    uncited (`attributed="true"`) prints as [n~], and is listed as matched unless the model cited
    it elsewhere. A sentence no passage supports prints [?], explained under the sources."""

    def __init__(self, out: TextIO, err: TextIO, color: bool, *, searched: bool = True) -> None:
        self.out, self.err, self.color = out, err, color
        self.searched = searched  # False: no knowledge base was chosen, so the answer is the model's alone
        self._in_thinking = False
        self.failed = False
        self.cited: dict[str, str] = {}  # chunk id or url -> label shown under the answer
        self.model_cited: set[str] = set()  # ...of which the model itself cited these
        self.unsupported = False  # some sentence was marked as supported by no passage
        self.places: dict[str, str] = {}  # chunk id -> where its passage stands ("p. 3", a heading path)

    def _footnote(self, match: re.Match[str]) -> str:
        attributes = dict(_ATTRIBUTE.findall(match.group(2)))
        if attributes.get("unsupported") == "true" and not attributes.get("chunk_id"):
            self.unsupported = True
            return UNSUPPORTED_FOOTNOTE
        key = attributes.get("chunk_id") or attributes.get("url") or match.group(0)
        if key not in self.cited:
            self.cited[key] = attributes.get("title") or attributes.get("url") or key
        number = list(self.cited).index(key) + 1
        if attributes.get("attributed") == "true":
            return f"[{number}~]"
        self.model_cited.add(key)
        return f"[{number}]"

    def _sources(self) -> str:
        lines = [f"[{n}] {label}" + (f", {self.places[key]}" if self.places.get(key) else "")
                 + ("" if key in self.model_cited else " (matched by Ragline, not cited by the model)")
                 for n, (key, label) in enumerate(self.cited.items(), start=1)]
        if self.unsupported:
            lines.append(UNSUPPORTED_NOTE)
        return "\n" + "\n".join(lines) if lines else ""

    def __call__(self, event: StreamResponse) -> None:
        kind = event.response_type
        if kind == ResponseType.THINKING and event.content:
            if not self._in_thinking and self.color:
                self.out.write(DIM)
            self._in_thinking = True
            self.out.write(event.content)
        elif kind == ResponseType.REFERENCES:
            self.places.update({str(item.get("chunk_id")): place(item.get("location")) for item in event.knowledge_references or []})
        elif kind == ResponseType.ANSWER:
            self._end_thinking()
            self.out.write(_KB_TAG.sub(self._footnote, event.content))
            if event.done and (event.data or {}).get("truncated"):
                self.err.write("\n[answer truncated by the output limit]")
        elif kind == ResponseType.ERROR:
            self._end_thinking()
            self.failed = True
            first_line = (event.content or "the answer failed").strip().splitlines()[0]  # provider errors run to paragraphs
            self.err.write(f"\nragline: error: {first_line}\n")
        elif kind == ResponseType.COMPLETE:
            self._end_thinking()
            self.out.write(self._sources() + "\n")
            if not self.searched and not self.failed:
                self.out.flush()
                self.err.write(UNSEARCHED_NOTE + "\n")
        self.out.flush()

    def _end_thinking(self) -> None:
        if self._in_thinking:
            self.out.write(RESET + "\n" if self.color else "\n")
            self._in_thinking = False
