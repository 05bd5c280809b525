"""Public citation tags: `<ref id="cN"/>` in, `<kb .../>` and `<web .../>` out.

Replaces the tag half of the seed's internal/modelcontext/citations.go: rendering the public
tags the front end turns into superscripts, reading the ids out of a model's ref tag, and
folding public tags replayed from history back into refs (`CompactPublicCitations`).

Tolerated ref spellings: `<ref id="c1"/>`, `<ref id='c1' />`, `<ref id=c1>`, `<ref id="C1">`,
`<ref id="c1"></ref>` (the closing tag is dropped on its own) and several ids in one tag
(`<ref id="c1, c2"/>`). Bracket forms such as `[c1]` are NOT citations: the protocol never asks
for them and `[c1]` is ordinary text in code and tables, so it is left exactly as written.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

from ragline.citations.sources import ChunkRef, WebRef

_REF_ID_ATTR = re.compile(r"""(?i)(?<![\w-])id\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'/>]+))""")
_ALIAS_SEPARATORS = re.compile(r"[\s,;]+")
_ATTR = re.compile(r"""(?i)([\w-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')""")
PUBLIC_TAG = re.compile(r"(?i)<(kb|web)(?=[\s/>])[^<>]*>")


def ref_aliases(body: str) -> list[str]:
    """The aliases named by a ref tag's attribute text, lower-cased, in order, without repeats."""
    aliases: list[str] = []
    for match in _REF_ID_ATTR.finditer(body):
        value = next(group for group in match.groups() if group is not None)
        for alias in _ALIAS_SEPARATORS.split(html.unescape(value)):
            alias = alias.strip().lower()
            if alias and alias not in aliases:
                aliases.append(alias)
    return aliases


def _attr(value: str) -> str:
    # quote=True escapes < > & " ', so a value can never close the tag or open another one.
    return html.escape(value, quote=True)


# Marks a citation Ragline matched to the sentence itself (citations/attribution.py), not one the
# model wrote: the page draws it apart and the CLI footnote says so.
ATTRIBUTED = 'attributed="true"'
# Marks a sentence that no passage given to the model supports (citations/attribution.py): not a
# source but the knowledge base's verdict, so a kb tag without a chunk. The page shows a "?" where a
# source would stand, the CLI "[?]", and plain text drops it. Model-written kb tags are removed by
# the stream decoder, so only attribution can write one.
UNSUPPORTED = 'unsupported="true"'
UNSUPPORTED_MARK = f"<kb {UNSUPPORTED}/>"


def kb_tag(ref: ChunkRef, *, attributed: bool = False) -> str:
    """`<kb chunk_id=... knowledge_id=... knowledge_base_id=... title=.../>`; empty fields omitted."""
    fields = (
        ("chunk_id", ref.chunk_id),
        ("knowledge_id", ref.knowledge_id),
        ("knowledge_base_id", ref.knowledge_base_id),
        ("title", ref.title),
        ("chunk_type", ref.chunk_type),
    )
    attributes = " ".join(f'{name}="{_attr(value)}"' for name, value in fields if value)
    return f"<kb {attributes}{_mark(attributed)}/>"


def web_tag(ref: WebRef, *, attributed: bool = False) -> str:
    return f'<web url="{_attr(ref.url)}" title="{_attr(ref.title)}"{_mark(attributed)}/>'


def _mark(attributed: bool) -> str:
    return f" {ATTRIBUTED}" if attributed else ""


def is_unsupported_mark(tag: str) -> bool:
    """Whether a public tag is the mark of an unsupported sentence rather than a source."""
    attributes = tag_attributes(tag)
    return attributes.get("unsupported") == "true" and not attributes.get("chunk_id")


def tag_attributes(tag: str) -> dict[str, str]:
    """Attributes of one tag, names lower-cased, values unescaped."""
    attributes: dict[str, str] = {}
    for match in _ATTR.finditer(tag):
        value = match.group(2) if match.group(2) is not None else match.group(3)
        attributes.setdefault(match.group(1).lower(), html.unescape(value))
    return attributes


def compact_public_tags(
    text: str,
    register_chunk: Callable[[ChunkRef], str],
    register_web: Callable[[str, str], str],
) -> str:
    """Turn `<kb/>`/`<web/>` tags of a replayed answer back into `<ref id="..."/>`.

    A past answer shown to the model in its public form would teach it to write kb tags itself
    and would leak chunk ids into the context. The callbacks register the source (as navigation,
    not evidence) and return its alias; a tag they cannot place is left untouched.
    """

    def fold(match: re.Match[str]) -> str:
        if is_unsupported_mark(match.group(0)):
            return ""  # a verdict on the past answer, not a source the model could cite again
        attributes = tag_attributes(match.group(0))
        if match.group(1).lower() == "kb":
            chunk_id = attributes.get("chunk_id", "")
            alias = (
                register_chunk(
                    ChunkRef(
                        chunk_id=chunk_id,
                        knowledge_id=attributes.get("knowledge_id", ""),
                        knowledge_base_id=attributes.get("knowledge_base_id") or attributes.get("kb_id", ""),
                        title=attributes.get("title") or attributes.get("doc", ""),
                        chunk_type=attributes.get("chunk_type", ""),
                    )
                )
                if chunk_id
                else ""
            )
        else:
            url = attributes.get("url", "")
            alias = register_web(url, attributes.get("title", "")) if url else ""
        return f'<ref id="{alias}"/>' if alias else match.group(0)

    return PUBLIC_TAG.sub(fold, text)
