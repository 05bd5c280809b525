"""Boundary models of the search API (SearchParams in; the passage, SearchResult, out: contracts/passages.py) and the catalog rows.

Replaces types.SearchParams / types.SearchResult / KnowledgeBase of the seed
(internal/types, used by knowledgebase_search.go).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field
from pydantic.json_schema import SkipJsonSchema

from ragline import defaults
from ragline.contracts.access import AccessRule, Principal


def utcnow() -> datetime:
    return datetime.now(UTC)


class KnowledgeBaseType(StrEnum):
    DOCUMENT = "document"
    FAQ = "faq"


class FAQIndexMode(StrEnum):
    QUESTION_ONLY = "question_only"  # embed each question alone
    QUESTION_ANSWER = "question_answer"  # embed question + answer together


class ChunkingConfig(BaseModel):
    chunk_size: int = Field(defaults.CHUNK_SIZE, ge=16, description="Characters per chunk.")
    chunk_overlap: int = Field(defaults.CHUNK_OVERLAP, ge=0, description="Characters shared by neighbouring chunks.")
    parent_child: bool = Field(False, description="Index small children, keep big parents for context.")
    parent_chunk_size: int = Field(defaults.PARENT_CHUNK_SIZE, ge=64)
    child_chunk_size: int = Field(defaults.CHILD_CHUNK_SIZE, ge=16)


class KnowledgeBase(BaseModel):
    id: str
    tenant_id: str
    name: str
    type: KnowledgeBaseType = KnowledgeBaseType.DOCUMENT
    description: str = ""
    embedding_model: str
    embedding_base_url: str = ""
    vector_store: str = "default"  # store group key (seed: VectorStoreID)
    tags: list[str] = Field(default_factory=list)
    chunking: ChunkingConfig = Field(default_factory=ChunkingConfig)
    faq_index_mode: FAQIndexMode = FAQIndexMode.QUESTION_ANSWER
    shared: bool = False  # shared with every tenant (seed: organisation-shared KBs)
    access: AccessRule = Field(default_factory=AccessRule, description="Who in the tenant may read it; open when empty.")
    wiki_enabled: bool = False  # the chat model writes wiki pages from the documents; wiki_boost prefers them
    revision: int = 0  # bumped on every write; derived indexes rebuild when it moves
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)

    @property
    def embedding_key(self) -> str:
        return f"{self.embedding_model}@{self.embedding_base_url}"

    def readable_by(self, who: Principal) -> bool:
        """The one visibility rule: a tenant reads its own bases and every shared one, when the base's
        access rule lets the reader in and the reader's key reaches the base."""
        reached = who.may_name(self.id) or (self.tenant_id == who.tenant_id and who.may_name(self.name))  # a key's scope: ids, or its tenant's names
        return (self.tenant_id == who.tenant_id or self.shared) and reached and self.access.lets_in(who) is not None

    def owned_by(self, tenant_id: str) -> bool:
        """Only the owning tenant writes; shared bases are readable, not writable, by others."""
        return self.tenant_id == tenant_id


class Knowledge(BaseModel):
    """One document (or the FAQ entry set) inside a knowledge base."""

    id: str
    knowledge_base_id: str
    tenant_id: str
    title: str
    source: str = ""
    file_type: str = "txt"
    content_hash: str = ""
    chunk_count: int = 0
    metadata: dict[str, Any] = Field(default_factory=dict)
    access: AccessRule = Field(default_factory=AccessRule, description="Narrows its knowledge base's rule; open when empty.")
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class Hidden:
    """What one reader may not read in the bases a search covers: the documents, by which every
    store filters, and their chunks, read from the catalog only when a store that keys its rows by
    chunk asks (Chroma: it then drops rows by id instead of fetching each row's document)."""

    def __init__(self, documents: Collection[str] = (), chunks_of: Callable[[frozenset[str]], Collection[str]] | None = None) -> None:
        self.documents = frozenset(documents)
        self._chunks_of = chunks_of
        self._chunks: frozenset[str] | None = None
        self._lock = threading.Lock()

    def __bool__(self) -> bool:
        return bool(self.documents)

    def __repr__(self) -> str:
        return f"Hidden({len(self.documents)} documents)"

    @property
    def chunks(self) -> frozenset[str] | None:
        """The hidden documents' chunk ids; None when no catalog was given to read them from."""
        if self._chunks_of is None or not self.documents:
            return None if self.documents else frozenset()
        with self._lock:  # a reader's Hidden is shared by its concurrent searches: read once
            if self._chunks is None:
                self._chunks = frozenset(self._chunks_of(self.documents))
            return self._chunks


NOTHING_HIDDEN = Hidden()


class SearchParams(BaseModel):
    """One HybridSearch call over one or several knowledge bases."""

    query: str = Field(min_length=1)
    knowledge_base_ids: list[str] = Field(min_length=1)
    tenant_id: str = "default"
    reader: SkipJsonSchema[Principal | None] = Field(None, exclude=True, description="Who asks; unset: the tenant with no user, who reads only open documents.")
    knowledge_ids: list[str] = Field(default_factory=list, description="Restrict to these documents.")
    match_count: int = Field(0, description="Results wanted; <= 0 means the default (50).")
    vector_threshold: float = defaults.DEFAULT_VECTOR_THRESHOLD
    keyword_threshold: float = defaults.DEFAULT_KEYWORD_THRESHOLD
    disable_vector: bool = False
    disable_keyword: bool = False
    disable_recall_thresholds: bool = Field(False, description="Scoped searches keep everything they find.")
    query_embedding: list[float] | None = Field(None, description="Reuse a vector computed by the caller.")
    keyword_query: str | None = Field(None, description="Keyword side text when it differs (query expansion).")

    def who(self) -> Principal:
        return self.reader if self.reader is not None else Principal(self.tenant_id, "")


