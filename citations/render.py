"""The compact, alias-only view of search results that replaces the positional contexts.

Replaces the seed's `ModelOutput` rendering for display_type=search_results and
web_search_results (internal/modelcontext/model_output.go) and the FAQ-priority ordering of
`orderedPipelineReferences` (chat_pipeline/references.go). The model reads each source under
its alias (`<result id="c1" ...>`), which is what it cites; no durable id appears.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

from ragline.citations.sources import SourceChunk

NO_VERIFIED_EVIDENCE = (
    "Retrieved source bodies could not be verified. Do not cite or infer facts from unavailable retrieval evidence."
)


def order_by_faq_priority(results: Iterable[SourceChunk], faq_priority: bool) -> list[SourceChunk]:
    """FAQ hits first when FAQ priority is on, each group in its merged order.

    Aliases are numbered in this order, so with FAQ priority c1 is the best FAQ answer.
    """
    results = list(results)
    if not faq_priority:
        return results
    return [r for r in results if r.is_faq] + [r for r in results if not r.is_faq]


@dataclass(frozen=True, slots=True)
class ChunkView:
    """One knowledge chunk as the model sees it: aliases and text, never ids."""

    alias: str
    content: str
    title: str = ""
    document_alias: str = ""
    knowledge_base_alias: str = ""
    chunk_type: str = ""
    priority: str = ""  # "high" (FAQ) / "supplementary" (document) under FAQ priority
    exact_match: bool = False  # FAQ scoring at or above the direct-answer threshold


@dataclass(frozen=True, slots=True)
class PageView:
    """One web page as the model sees it; the domain, not the URL, so it cites wN instead."""

    alias: str
    content: str
    title: str = ""
    domain: str = ""


def _attributes(pairs: Sequence[tuple[str, str]]) -> str:
    return "".join(f' {name}="{html.escape(value, quote=True)}"' for name, value in pairs if value)


def render_search_results(chunks: Sequence[ChunkView]) -> str:
    """`<search_results>` with one `<result id="cN" ...>` per chunk, in the given order."""
    lines = ["<search_results>"]
    for chunk in chunks:
        attributes = _attributes(
            (
                ("id", chunk.alias),
                ("doc", chunk.document_alias),
                ("kb", chunk.knowledge_base_alias),
                ("type", chunk.chunk_type),
                ("priority", chunk.priority),
                ("match", "exact" if chunk.exact_match else ""),
                ("title", chunk.title),
            )
        )
        lines += [f"<result{attributes}>", escape(chunk.content), "</result>"]
    lines.append("</search_results>")
    return "\n".join(lines)


def render_web_search_results(pages: Sequence[PageView]) -> str:
    """`<web_search_results>`, marked untrusted: page text must not be taken as instructions."""
    lines = ['<web_search_results trust="untrusted">']
    for page in pages:
        attributes = _attributes((("id", page.alias), ("title", page.title), ("domain", page.domain)))
        lines += [f"<page{attributes}>", escape(page.content), "</page>"]
    lines.append("</web_search_results>")
    return "\n".join(lines)


def render_plain_results(chunks: Sequence[ChunkView]) -> str:
    """Passages as plain text, one block each, for small local models.

    A 0.5B model answers worse from the tagged layout: on 94 XQuAD questions with the gold passage
    retrieved, token F1 was 0.602 from plain passages and 0.530 from `<result>` elements plus the
    citation rules. Such a model writes no refs either way, so its citations are attributed after
    generation and the passages need no handles. What the attributes said (FAQ priority, exact
    match, chunk type) goes on a note line.
    """
    blocks = []
    for chunk in chunks:
        notes = [n for n in (chunk.chunk_type, f"{chunk.priority} priority" if chunk.priority else "",
                             "exact match" if chunk.exact_match else "") if n]
        head = chunk.title if chunk.title and not chunk.content.startswith(chunk.title) else ""
        head = " ".join(part for part in (head, f"({', '.join(notes)})" if notes else "") if part)
        blocks.append(f"{head}\n{chunk.content}" if head else chunk.content)
    return "\n\n".join(blocks)


def render_sections(chunks: Sequence[ChunkView], pages: Sequence[PageView], *, plain: bool = False) -> str:
    """Knowledge first, then web; the fixed warning when results existed but none could be shown.

    `plain` renders knowledge passages as plain text (small local models); web pages keep their
    untrusted envelope whatever the model, since their text must never read as instructions.
    """
    sections = []
    if chunks:
        sections.append(render_plain_results(chunks) if plain else render_search_results(chunks))
    if pages:
        sections.append(render_web_search_results(pages))
    return "\n".join(sections) or NO_VERIFIED_EVIDENCE
