"""Answer-local source aliases: cN chunk, wN web page, dN document, bN knowledge base.

Replaces the seed's internal/modelcontext/sources.go (`sourceRegistry`). The model never sees a
chunk, document or knowledge-base id; it sees cN/dN/bN/wN, and only the aliases this table
handed out can be turned back into ids. `SourceChunk` is the boundary type: one search result as
the generation nodes hand it over (the seed's `types.SearchResult`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Literal
from urllib.parse import urldefrag

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from ragline.citations.aliases import AliasTable

SourceKind = Literal["chunk", "document", "knowledge_base", "web"]

WEB_SOURCE = "web_search"
FAQ_CHUNK_TYPE = "faq"
DEFAULT_CHUNK_TYPE = "text"

# Exactly the shape this table hands out. A value of this shape is never accepted as a new
# durable id: a model echoing "c7" back must not mint a source called "c7".
ALIAS_SHAPE = re.compile(r"(?i)^[cdbw][1-9][0-9]*$")


class SourceChunk(BaseModel):
    """One merged search result, as retrieval hands it to generation.

    `chunk_id` (also accepted as `id`) is the chunk's durable id; for a web page it may be the
    URL, and `url` wins when set. `title` is the knowledge title, else its file name.
    `base_score` is the score before FAQ/wiki/memory boosts (the seed compares *that* with the
    FAQ direct-answer threshold so boosts cannot fake an exact match); `score` is used when unset.
    """

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    chunk_id: str = Field(validation_alias=AliasChoices("chunk_id", "id"))
    content: str = ""
    knowledge_id: str = ""
    knowledge_base_id: str = ""
    title: str = ""
    score: float = 0.0
    base_score: float | None = None
    chunk_index: int = 0
    chunk_type: str = DEFAULT_CHUNK_TYPE
    match_type: str = ""
    source: Literal["knowledge_base", "web_search"] = "knowledge_base"
    url: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def is_web(self) -> bool:
        return self.source == WEB_SOURCE or self.chunk_type == WEB_SOURCE

    @property
    def is_faq(self) -> bool:
        return self.chunk_type == FAQ_CHUNK_TYPE

    @property
    def page_url(self) -> str:
        return self.url or self.chunk_id


@dataclass(frozen=True, slots=True)
class ChunkRef:
    """What a cN alias expands to (the seed's `ChunkReference`)."""

    chunk_id: str
    knowledge_id: str = ""
    knowledge_base_id: str = ""
    title: str = ""
    chunk_index: int = 0
    chunk_type: str = ""


@dataclass(frozen=True, slots=True)
class WebRef:
    """What a wN alias expands to."""

    url: str
    title: str = ""


def _merge_chunk(old: ChunkRef, new: ChunkRef) -> ChunkRef:
    return replace(
        old,
        knowledge_id=old.knowledge_id or new.knowledge_id,
        knowledge_base_id=old.knowledge_base_id or new.knowledge_base_id,
        title=old.title or new.title,
        chunk_index=old.chunk_index or new.chunk_index,
        chunk_type=old.chunk_type or new.chunk_type,
    )


def _merge_web(old: WebRef, new: WebRef) -> WebRef:
    return old if old.title or not new.title else replace(old, title=new.title)


def canonical_url(url: str) -> str:
    """The key web pages are de-duplicated on: the same page with another #fragment is one source."""
    return urldefrag(url.strip()).url


class SourceTable:
    """The four source alias spaces of one answer, plus which aliases may be cited.

    Addressable is not citable: a source seen only in replayed history or a tool argument gets
    an alias (so the model can navigate to it) but may substantiate a claim only once a search
    result of this answer supplied it (`evidence=True`). Unbacked citations are dropped.
    """

    def __init__(self) -> None:
        self.chunks: AliasTable[ChunkRef] = AliasTable("c")
        self.documents: AliasTable[None] = AliasTable("d")
        self.knowledge_bases: AliasTable[None] = AliasTable("b")
        self.webs: AliasTable[WebRef] = AliasTable("w")
        self._citable: set[str] = set()
        self._id_pattern: re.Pattern[str] | None = None
        self._id_pattern_size = -1

    def register_chunk(self, ref: ChunkRef, *, evidence: bool = True) -> str:
        chunk_id = ref.chunk_id.strip()
        if not chunk_id:
            return ""
        if ALIAS_SHAPE.match(chunk_id):
            return self._known(self.chunks, chunk_id)
        alias = self.chunks.register(chunk_id, chunk_id, replace(ref, chunk_id=chunk_id), _merge_chunk)
        if evidence:
            self._citable.add(alias)
        return alias

    def register_document(self, knowledge_id: str) -> str:
        return self._register_plain(self.documents, knowledge_id)

    def register_knowledge_base(self, knowledge_base_id: str) -> str:
        return self._register_plain(self.knowledge_bases, knowledge_base_id)

    def register_web(self, url: str, title: str = "", *, evidence: bool = True) -> str:
        url = url.strip()
        if not url:
            return ""
        if ALIAS_SHAPE.match(url):
            return self._known(self.webs, url)
        # Keyed on the canonical URL but expanded to the URL the model was shown.
        alias = self.webs.register(canonical_url(url), url, WebRef(url=url, title=title), _merge_web)
        if evidence:
            self._citable.add(alias)
        return alias

    def register_result(self, result: SourceChunk, *, evidence: bool = True) -> str:
        """Register one search result and the document and knowledge base it belongs to."""
        if result.is_web:
            return self.register_web(result.page_url, result.title, evidence=evidence)
        self.register_document(result.knowledge_id)
        self.register_knowledge_base(result.knowledge_base_id)
        ref = ChunkRef(
            chunk_id=result.chunk_id,
            knowledge_id=result.knowledge_id,
            knowledge_base_id=result.knowledge_base_id,
            title=result.title,
            chunk_index=result.chunk_index,
            chunk_type=result.chunk_type,
        )
        return self.register_chunk(ref, evidence=evidence)

    def citable_alias(self, result: SourceChunk) -> str:
        """The alias `result` was registered under as evidence; "" when it never was (no lookup registers)."""
        if result.is_web:
            alias = self.webs.alias_for(canonical_url(result.page_url.strip()))
        else:
            alias = self.chunks.alias_for(result.chunk_id.strip())
        return alias if alias is not None and alias in self._citable else ""

    def citable_chunk(self, alias: str) -> ChunkRef | None:
        entry = self.chunks.resolve(alias)
        return entry.meta if entry is not None and entry.alias in self._citable else None

    def citable_web(self, alias: str) -> WebRef | None:
        entry = self.webs.resolve(alias)
        return entry.meta if entry is not None and entry.alias in self._citable else None

    def durable_for(self, alias: str, kind: SourceKind) -> str | None:
        """The durable id behind an alias of the given kind, for decoding tool arguments."""
        table = self._table(kind)
        entry = table.resolve(alias)
        return entry.value if entry is not None else None

    def compact_known_ids(self, text: str) -> str:
        """Replace registered chunk/document/knowledge-base ids in free text by their aliases.

        Only ids this table already knows are touched, and only as whole tokens, so an id-like
        string in a document body is never guessed to be a source (the seed's CompactKnownText).
        """
        pattern = self._known_id_pattern()
        if pattern is None or not text:
            return text
        return pattern.sub(lambda m: self._alias_for_id(m.group(0)), text)

    def _known(self, table: AliasTable[Any], alias: str) -> str:
        entry = table.resolve(alias)
        return entry.alias if entry is not None else ""

    def _register_plain(self, table: AliasTable[None], durable_id: str) -> str:
        durable_id = durable_id.strip()
        if not durable_id:
            return ""
        if ALIAS_SHAPE.match(durable_id):
            return self._known(table, durable_id)
        return table.register(durable_id, durable_id, None)

    def _table(self, kind: SourceKind) -> AliasTable[Any]:
        tables: dict[str, AliasTable[Any]] = {
            "chunk": self.chunks,
            "document": self.documents,
            "knowledge_base": self.knowledge_bases,
            "web": self.webs,
        }
        return tables[kind]

    def _alias_for_id(self, durable_id: str) -> str:
        for table in (self.chunks, self.documents, self.knowledge_bases):
            alias = table.alias_for(durable_id)
            if alias is not None:
                return alias
        return durable_id

    def _known_id_pattern(self) -> re.Pattern[str] | None:
        size = len(self.chunks) + len(self.documents) + len(self.knowledge_bases)
        if size != self._id_pattern_size:
            ids = {e.value for t in (self.chunks, self.documents, self.knowledge_bases) for e in t.entries()}
            # Longest first so an id that contains a shorter one is replaced whole.
            alternatives = "|".join(re.escape(i) for i in sorted(ids, key=len, reverse=True))
            self._id_pattern = re.compile(rf"(?<![\w-])(?:{alternatives})(?![\w-])") if ids else None
            self._id_pattern_size = size
        return self._id_pattern
