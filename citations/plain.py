"""Answer text without citation tags, and the citations as data.

Ragline's own page reads the public `<kb .../>` and `<web .../>` tags inside an answer. Every
other consumer (LangGraph's messages stream, a parent graph, an agent's tool, the
OpenAI-compatible door, MCP) gets plain text instead, with each citation kept as a `Citation`
at the offset of the plain text where its tag stood, or as an `[n]` footnote when asked.

Streamed deltas never split a public tag (the stream decoder and the attribution hold a tag back
until it is whole), so a `PlainText` can be fed delta by delta. The spaces right before a tag go
with it, within a delta.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ragline.citations.tags import ATTRIBUTED, PUBLIC_TAG, is_unsupported_mark, tag_attributes


@dataclass(frozen=True)
class Citation:
    """One citation of an answer: its source, whether Ragline matched it rather than the model
    citing it, the footnote number of its source, and where it stood in the plain text."""

    kind: str  # "kb" or "web"
    number: int
    offset: int
    chunk_id: str = ""
    knowledge_id: str = ""
    knowledge_base_id: str = ""
    title: str = ""
    url: str = ""
    attributed: bool = False

    @property
    def source_key(self) -> str:
        return self.chunk_id or self.url

    def as_dict(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value not in ("", None)}


def _citation(tag: str, kind: str, number: int, offset: int) -> Citation:
    attributes = tag_attributes(tag)
    return Citation(
        kind=kind,
        number=number,
        offset=offset,
        chunk_id=attributes.get("chunk_id", ""),
        knowledge_id=attributes.get("knowledge_id", ""),
        knowledge_base_id=attributes.get("knowledge_base_id", ""),
        title=attributes.get("title", ""),
        url=attributes.get("url", ""),
        attributed=ATTRIBUTED in tag,
    )


UNSUPPORTED_FOOTNOTE = "[?]"


@dataclass
class PlainText:
    """Strips public tags from an answer fed in deltas; `footnotes` writes `[n]` in their place
    (`[n~]` for a source Ragline matched to the sentence, `[?]` for a sentence no passage supports),
    numbered by source in order of first use. `unsupported` holds where each unsupported sentence
    ends in the plain text."""

    footnotes: bool = False
    text: str = ""
    citations: list[Citation] = field(default_factory=list)
    unsupported: list[int] = field(default_factory=list)
    _numbers: dict[str, int] = field(default_factory=dict)

    def feed(self, delta: str) -> tuple[str, list[Citation]]:
        """The delta's plain text and the citations it carried."""
        parts: list[str] = []
        found: list[Citation] = []
        position = 0
        for match in PUBLIC_TAG.finditer(delta):
            # "three minutes <kb/>." reads "three minutes." (or "three minutes[1].") without its tag
            parts.append(delta[position : match.start()].rstrip(" \t"))
            position = match.end()
            offset = len(self.text) + sum(len(part) for part in parts)
            if is_unsupported_mark(match.group(0)):
                self.unsupported.append(offset)
                if self.footnotes:
                    parts.append(UNSUPPORTED_FOOTNOTE)
                continue
            attributes = tag_attributes(match.group(0))
            key = attributes.get("chunk_id") or attributes.get("url") or match.group(0)
            number = self._numbers.setdefault(key, len(self._numbers) + 1)
            citation = _citation(match.group(0), match.group(1).lower(), number, offset)
            found.append(citation)
            if self.footnotes:
                parts.append(f"[{number}~]" if citation.attributed else f"[{number}]")
        parts.append(delta[position:])
        plain = "".join(parts)
        self.text += plain
        self.citations.extend(found)
        return plain, found

    def sources(self) -> list[Citation]:
        """One citation per source, in footnote order (the first place each was cited)."""
        first: dict[int, Citation] = {}
        for citation in self.citations:
            first.setdefault(citation.number, citation)
        return [first[number] for number in sorted(first)]


def plain_text(text: str, *, footnotes: bool = False) -> tuple[str, list[Citation]]:
    """A whole answer's plain text and its citations."""
    plain = PlainText(footnotes=footnotes)
    plain.feed(text)
    return plain.text, plain.citations
