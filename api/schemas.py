"""Request and response bodies of the HTTP API (validated by pydantic; unknown fields refused)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ragline import defaults
from ragline.api.inputs import plain_text
from ragline.contracts.passages import SearchResult
from ragline.contracts.request import PipelineRequest
from ragline.ingestion.faq_import import FAQEntry, FAQImportReport  # noqa: F401  (FAQImportReport: a response model)
from ragline.retrieval.types import ChunkingConfig, FAQIndexMode, Knowledge, KnowledgeBase, KnowledgeBaseType
from ragline.service.assistant_service import AssistantCreate, AssistantUpdate
from ragline.service.assistants import Assistant
from ragline.service.chat_history import MessageHit, SearchMode
from ragline.service.conversations import Message
from ragline.service.sessions import LastRequestState, Session


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- sessions ---


class SessionCreate(Strict):
    title: str = Field("", max_length=200, description="Leave empty to have one generated from the first question.")
    description: str = Field("", max_length=2000)


class SessionUpdate(Strict):
    title: str | None = Field(None, max_length=200)
    description: str | None = Field(None, max_length=2000)
    pinned: bool | None = Field(None, description="Pinned sessions are listed first.")
    last_request_state: LastRequestState | None = Field(None, description="The input line's choices to restore (UI only); also saved by every question.")


class MessageSearchQuery(Strict):
    q: str = Field(min_length=1, max_length=defaults.MESSAGE_SEARCH_MAX_QUERY_CHARS, description="Words or a phrase to find in past questions and answers.")
    mode: SearchMode = Field("hybrid", description="hybrid (vector and keyword, fused), vector or keyword.")
    page: int = Field(1, ge=1, le=1_000)
    page_size: int = Field(defaults.MESSAGE_SEARCH_PAGE_SIZE, ge=1, le=defaults.MESSAGE_SEARCH_MAX_PAGE_SIZE)

    @field_validator("q")
    @classmethod
    def _has_words(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the search needs words, not only blanks")
        return value.strip()


class MessageSearchPage(BaseModel):
    items: list[MessageHit]
    total: int = Field(description=f"Turns matched (the search ranks at most {defaults.MESSAGE_SEARCH_MAX_HITS} chunks).")
    page: int
    page_size: int


class PageQuery(Strict):
    page: int = Field(1, ge=1, le=1_000_000)
    page_size: int = Field(defaults.SESSION_PAGE_SIZE, ge=1, le=defaults.SESSION_MAX_PAGE_SIZE)


class SessionPage(BaseModel):
    items: list[Session]
    total: int
    page: int
    page_size: int


class BatchDelete(Strict):
    ids: list[str] = Field(min_length=1, max_length=defaults.SESSION_BATCH_DELETE_MAX)


class ClearSessions(Strict):
    confirm: Literal[True] = Field(description="Must be true: every session of the caller is deleted, with its messages.")


class Deleted(BaseModel):
    deleted: list[str]


class TitleRequest(Strict):
    query: str | None = Field(None, max_length=32_000, description="Title this question; default: the session's first one.")


# --- assistants ---


def _assistant_name(value: str | None) -> str | None:
    if value is None:
        return None
    value = plain_text(value)  # no control characters, one line
    if not value:
        raise ValueError("an assistant needs a name")
    return value


class AssistantCreateIn(AssistantCreate):
    _one_line = field_validator("name")(_assistant_name)


class AssistantUpdateIn(AssistantUpdate):
    _one_line = field_validator("name")(_assistant_name)


class ChatRequest(PipelineRequest):
    """A turn's body: the question and its settings, and optionally the assistant it runs with."""

    assistant_id: str | None = Field(None, max_length=200, description="Run with this assistant's latest version: its configuration under "
                                     "what the body sets itself, which must be among the assistant's overridable settings (else 422).")


class AssistantPage(BaseModel):
    items: list[Assistant]
    total: int
    page: int
    page_size: int


class AssistantQuery(Strict):
    version: int | None = Field(None, ge=1, description="Read this version (default: the latest).")


# --- messages ---


class MessagesQuery(Strict):
    before_id: str | None = Field(None, description="Only messages before this one (the next page back).")
    limit: int = Field(defaults.MESSAGE_PAGE_SIZE, ge=1, le=defaults.MESSAGE_MAX_PAGE_SIZE)


class MessagePage(BaseModel):
    items: list[Message]
    has_more: bool


class MessageRef(Strict):
    message_id: str = Field(min_length=1, max_length=200)


class Rewound(BaseModel):
    removed: list[str]


# --- runs ---


class StopRequest(Strict):
    message_id: str | None = Field(None, description="The answer to stop; default: the session's running one.")


class InjectRequest(Strict):
    content: str = Field(min_length=1, max_length=32_000, description="What to tell the agent while it runs; it reads it at its next step.")
    message_id: str | None = Field(None, description="The running answer; default: the session's running one.")


class InjectResult(BaseModel):
    message_id: str
    injected: bool = True


class ApprovalRequest(Strict):
    tool_call_id: str = Field(min_length=1, max_length=200, description="The call a tool_approval_required event named (data.tool_call_id).")
    approved: bool = Field(description="true: the call runs; false: it does not, and the agent is told why.")
    reason: str = Field("", max_length=2000, description="Why (shown to the agent with a denial, and in tool_approval_resolved).")
    message_id: str | None = Field(None, description="The running answer; default: the session's running one.")


class ApprovalResult(BaseModel):
    message_id: str
    tool_call_id: str
    approved: bool


class WaitingCall(BaseModel):
    tool_call_id: str
    decided: bool = Field(description="True once a decision was sent; the answer goes on when every call is decided.")


class PendingApprovals(BaseModel):
    message_id: str | None = Field(description="The running answer; null when nothing is being generated.")
    calls: list[WaitingCall] = Field(description="The tool calls it waits on (empty when it waits on none).")


class StopResult(BaseModel):
    message_id: str
    stopped: bool = Field(description="False when the answer had already completed.")


class ContinueQuery(Strict):
    message_id: str | None = Field(None, description="The assistant message to follow; default: the session's running one.")


class Health(BaseModel):
    status: str = Field(description="ok, or unavailable when a store the service needs does not answer or is full (then HTTP 503).")
    backend: dict[str, str]
    checks: dict[str, str] = Field(default_factory=dict, description="Each store that was asked, and its answer.")
    runs: int
    auth: str


def page_of(items: list[Any], total: int, query: PageQuery) -> SessionPage:
    return SessionPage(items=items, total=total, page=query.page, page_size=query.page_size)


# --- knowledge bases, documents, FAQ, search ---


class KnowledgeBaseCreate(Strict):
    name: str = Field(min_length=1, max_length=200)
    type: KnowledgeBaseType = KnowledgeBaseType.DOCUMENT
    description: str = Field("", max_length=2000)
    tags: list[str] = Field(default_factory=list, max_length=50)
    chunking: ChunkingConfig | None = None
    faq_index_mode: FAQIndexMode = FAQIndexMode.QUESTION_ANSWER
    wiki_enabled: bool = Field(False, description="The chat model writes wiki pages from the documents (in the background).")


class KnowledgeBaseUpdate(Strict):
    name: str | None = Field(None, min_length=1, max_length=200)
    description: str | None = Field(None, max_length=2000)
    tags: list[str] | None = Field(None, max_length=50)
    wiki_enabled: bool | None = Field(None, description="On: pages are written for the current documents; off: they are removed.")


class KnowledgeBaseList(BaseModel):
    items: list[KnowledgeBase]


class TextDocumentIn(Strict):
    text: str = Field(min_length=1, max_length=5_000_000)
    title: str = Field("", max_length=500)
    source: str = Field("", max_length=1000, description="Identifies the document: the same source again replaces it.")

    @field_validator("title", "source")
    @classmethod
    def _one_line(cls, value: str) -> str:
        return plain_text(value)  # no NUL, no control characters, one line


class DocumentList(BaseModel):
    items: list[Knowledge]


class ChunkOut(BaseModel):
    id: str
    knowledge_id: str
    chunk_index: int
    chunk_type: str
    content: str
    parent_id: str | None = None
    pre_id: str | None = None
    next_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class ChunkList(BaseModel):
    items: list[ChunkOut]


class DocumentTextQuery(Strict):
    offset: int = Field(0, ge=0, description="The first character to return.")
    limit: int = Field(defaults.DOCUMENT_TEXT_PAGE_CHARS, ge=1, le=defaults.DOCUMENT_TEXT_PAGE_CHARS,
                       description="Characters to return at most.")


class DocumentText(BaseModel):
    """A document's parsed text (or a window of it): what the chunks' offsets count in."""

    knowledge_id: str
    title: str
    file_type: str
    offset: int = Field(description="Where `text` starts in the whole text.")
    text: str
    total_chars: int = Field(description="Length of the whole text.")
    page_starts: list[int] = Field(default_factory=list, description="A PDF: where page 1, 2, ... begins in the whole text.")


class FAQEntriesIn(Strict):
    entries: list[FAQEntry] = Field(min_length=1, max_length=1000)


class FAQEntryOut(FAQEntry):
    id: str


class FAQList(BaseModel):
    items: list[FAQEntryOut]
    total: int = Field(description="Entries of the knowledge base.")
    page: int
    page_size: int


class FAQPageQuery(Strict):
    page: int = Field(1, ge=1, le=1_000_000)
    page_size: int = Field(defaults.FAQ_PAGE_SIZE, ge=1, le=defaults.FAQ_MAX_PAGE_SIZE)


class FAQImportQuery(Strict):
    dry_run: bool = Field(False, description="Validate and report; store nothing.")


class SearchRequest(Strict):
    query: str = Field(min_length=1, max_length=4000)
    knowledge_base_ids: list[str] = Field(min_length=1, max_length=20)
    knowledge_ids: list[str] = Field(default_factory=list, max_length=200)
    match_count: int = Field(0, ge=0, le=defaults.MAX_RETRIEVAL_POOL_SIZE, description="0 = the default (50).")
    vector_threshold: float = Field(defaults.DEFAULT_VECTOR_THRESHOLD, ge=0, le=1)
    keyword_threshold: float = Field(defaults.DEFAULT_KEYWORD_THRESHOLD, ge=0, le=1)
    disable_vector: bool = False
    disable_keyword: bool = False
    disable_recall_thresholds: bool = False
    rerank_top_k: int = Field(0, ge=0, le=200, description="Above 0: the pipeline's rerank chain (the configured rerank model, "
                              "threshold rules, composite scores, FAQ boost, MMR) keeps this many; 0 returns the fused hits as they are.")
    rerank_threshold: float = Field(defaults.DEFAULT_RERANK_THRESHOLD, ge=0, le=1, description="Minimum rerank score (with rerank_top_k).")
    faq_priority_enabled: bool = Field(False, description="Boost FAQ answers as the pipeline does (with rerank_top_k).")
    faq_score_boost: float = Field(defaults.DEFAULT_FAQ_SCORE_BOOST, ge=1, description="Multiplier of FAQ scores under FAQ priority.")


class SearchResults(BaseModel):
    items: list[SearchResult]


# --- long-term memories ---


class MemoryCreate(Strict):
    text: str = Field(min_length=1, max_length=2000, description="Something to remember about the caller.")

    @field_validator("text")
    @classmethod
    def _has_words(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a memory needs text, not only blanks")
        return value


class MemoryItem(BaseModel):
    id: str
    text: str
    created_at: str


class MemoryList(BaseModel):
    items: list[MemoryItem]
