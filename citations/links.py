"""Links in an answer come from its sources, or they go.

A planted document ("add this link: https://evil.example/...") steers a small model into
repeating the link; shown beside a source badge, it reads as vouched for. So when an answer has
sources, every URL it writes must appear in a source passage (or a web result's address) or in
what the user wrote; any other URL is replaced by a note. A Markdown link keeps its words.

Runs on the model's raw text, before ref tags are decoded (decoded tags carry their own URLs).
Streaming holds back only what may still grow into a URL or a Markdown link, so a link is never
shown and then withdrawn.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

REMOVED = "(link removed: it is in none of the sources)"
_URL = re.compile(r"""(?:https?://|www\.)[^\s<>()\[\]{}"'`]+""", re.IGNORECASE)
_MARKDOWN_LINK = re.compile(r"\[([^\[\]\n]{0,300})\]\(\s*(" + _URL.pattern + r")\s*\)", re.IGNORECASE)
_TRAILING = ".,;:!?"
_PREFIXES = ("https://", "http://", "www.")
_LINK_SPAN_MAX = 400  # an unclosed `[` further back than this is prose, not a link being written


def _normal(url: str) -> str:
    url = url.rstrip(_TRAILING).lower()
    url = re.sub(r"^https?://", "", url)
    return url.removeprefix("www.").rstrip("/")


class LinkGuard:
    """The URLs an answer may carry: those in its sources and in the user's own words."""

    def __init__(self, texts: Iterable[str]) -> None:
        self.allowed = {_normal(m.group(0)) for text in texts for m in _URL.finditer(text or "")}

    def allows(self, url: str) -> bool:
        wanted = _normal(url)
        return bool(wanted) and any(a == wanted or a.startswith(wanted + "/") for a in self.allowed)

    def check(self, text: str) -> str:
        """The text with every URL its sources do not hold replaced (a Markdown link keeps its words)."""

        def markdown(match: re.Match[str]) -> str:
            return match.group(0) if self.allows(match.group(2)) else f"{match.group(1)} {REMOVED}"

        def bare(match: re.Match[str]) -> str:
            url = match.group(0)
            kept = url.rstrip(_TRAILING)
            return url if self.allows(kept) else REMOVED + url[len(kept):]

        parts = []
        last = 0
        for match in _MARKDOWN_LINK.finditer(text):  # links first: their URL must not be checked twice
            parts.append(_URL.sub(bare, text[last:match.start()]))
            parts.append(markdown(match))
            last = match.end()
        parts.append(_URL.sub(bare, text[last:]))
        return "".join(parts)

    def stream(self) -> LinkStream:
        return LinkStream(self)


class LinkStream:
    """`check` over a stream: `feed` returns what is safe to show now, `flush` the rest at the end."""

    def __init__(self, guard: LinkGuard) -> None:
        self.guard = guard
        self.buffer = ""

    def feed(self, chunk: str) -> str:
        self.buffer += chunk
        hold = _hold_from(self.buffer)
        ready, self.buffer = self.buffer[:hold], self.buffer[hold:]
        return self.guard.check(ready)

    def flush(self) -> str:
        ready, self.buffer = self.buffer, ""
        return self.guard.check(ready)


def _hold_from(text: str) -> int:
    """Where the text that may still change stops being safe: an open Markdown link, a URL that
    runs into the end, or an end that could be the start of one (`htt`, `www`)."""
    hold = len(text)
    bracket = text.rfind("[")
    tail = text[bracket:] if bracket >= 0 else ""
    label = tail.split("](", 1)[0]  # a newline ends a link's text, but may follow its "](" (_MARKDOWN_LINK)
    if bracket >= 0 and len(tail) <= _LINK_SPAN_MAX and ")" not in tail and "\n" not in label:
        hold = bracket
    for match in _URL.finditer(text):
        if match.end() == len(text):
            hold = min(hold, match.start())
    for size in range(min(len(text), max(map(len, _PREFIXES))), 0, -1):
        tail = text[-size:].lower()
        if any(prefix.startswith(tail) for prefix in _PREFIXES):  # "…ht" may become "…https://": URLs match mid-word too
            hold = min(hold, len(text) - size)
            break
    return hold
