"""Graph state: the seed's ChatManage split the LangGraph way.

- `PipelineRequest` (contracts/request.py): immutable, written once per turn from the input;
- the per-turn keys below (PipelineState), each with a reducer where several writers meet;
- runtime handles (contracts/context.py): passed as LangGraph runtime context, never checkpointed.

A session is a LangGraph thread: `messages` accumulates the conversation across turns, while
`begin_turn` resets every per-turn key so a turn never sees the previous turn's results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin, get_type_hints

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from typing_extensions import (
    TypedDict,  # pydantic builds JSON schemas (Studio) only from this one on 3.11
)

from ragline.contracts.passages import SearchResult, SearchTarget, merge_search_results
from ragline.contracts.request import PipelineRequest


class QueryIntent(StrEnum):
    """types.QueryIntent: what the user wants, as classified by query_understand."""

    KB_SEARCH = "kb_search"
    WEB_SEARCH = "web_search"
    GREETING = "greeting"
    CHITCHAT = "chitchat"
    FOLLOW_UP = "follow_up"
    IMAGE_ONLY = "image_only"
    DOC_ONLY = "doc_only"
    SUMMARIZE = "summarize"
    CLARIFICATION = "clarification"


_KB_RETRIEVAL_INTENTS = {"", QueryIntent.KB_SEARCH, QueryIntent.CLARIFICATION, QueryIntent.SUMMARIZE}


def normalize_intent(raw: object) -> str:
    """NormalizeQueryIntent: case, '-' and spaces ignored; unknown labels become '' (= search)."""
    if not isinstance(raw, str):
        return ""
    label = raw.strip().lower().replace("-", "_").replace(" ", "_")
    return label if label in QueryIntent._value2member_map_ else ""


def needs_kb_retrieval(intent: str) -> bool:
    return intent in _KB_RETRIEVAL_INTENTS


def needs_retrieval(intent: str, request: PipelineRequest) -> bool:
    """ChatManage.NeedsRetrieval: KB intents, or web_search when web search is on."""
    if intent == QueryIntent.WEB_SEARCH:
        return request.web_search_enabled
    return needs_kb_retrieval(intent)


class ErrorKind(StrEnum):
    """The seed's predefined PluginErrors that change the route."""

    SEARCH_NOTHING = "search_nothing"  # not a failure: routes to the fallback answer
    MODEL_CALL = "model_call"
    GET_CHAT_MODEL = "get_chat_model"
    RERANK = "rerank"
    RETRIEVAL = "retrieval"  # a store failed: the turn cannot search
    INVALID_INPUT = "invalid_input"
    INPUT_REFUSED = "input_refused"  # ValidateInput: the question is not answered at all


@dataclass(frozen=True)
class PipelineError:
    kind: ErrorKind
    message: str = ""


class TurnFailed(Exception):
    """A stage ended the turn on an error its event already told the client (events.fail_turn).

    Raised, not routed: no edge of the graph exists only for an error, and the run fails the way
    any LangGraph run fails (Studio shows it, a parent graph sees it). The turn driver sends no
    second error for it, and the thread's unfinished task is dropped by the next turn's input."""

    def __init__(self, error: PipelineError) -> None:
        super().__init__(error.message or error.kind.value)
        self.error = error


@dataclass(frozen=True)
class TurnIds:
    """Ids of one user turn, fixed when the turn starts so a resumed run keeps them."""

    session_id: str
    request_id: str
    user_message_id: str
    assistant_message_id: str


@dataclass(frozen=True)
class HistoryTurn:
    """One earlier question/answer round (types.History)."""

    request_id: str
    query: str
    answer: str
    references: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class ChatResponse:
    """The answer of this turn (chatManage.ChatResponse)."""

    content: str
    thinking: str = ""
    finish_reason: str | None = None
    truncated: bool = False
    stopped: bool = False
    fallback: bool = False
    model: str | None = None
    usage: dict[str, int] = field(default_factory=dict)


class TurnResults(TypedDict, total=False):
    """What one turn's stages write, reset by begin_turn; all a progress card returns (graph/cards.py)."""

    rewrite_query: str
    intent: str
    image_description: str
    history: list[HistoryTurn]
    search_targets: list[SearchTarget]  # what chunk search covers this turn, ids resolved
    search_results: Annotated[list[SearchResult], merge_search_results]
    rerank_results: list[SearchResult]
    merge_results: list[SearchResult]
    entities: list[str]
    entity_kb_ids: list[str]
    graph_result: dict[str, Any] | None
    user_content: str
    rendered_contexts: str
    system_prompt_override: str | None
    memory_prompt: str  # long-term memories recalled for this turn
    plain_reply: bool  # asked in messages form: the answer message carries no citation tags
    chat_response: ChatResponse | None
    error: PipelineError | None


class UnderstoodTurn(TurnResults, total=False):
    """What the query_understand card returns: the turn's results, and the user's message with the
    caption of its image (messages merge by id, so the conversation is unchanged otherwise)."""

    messages: Annotated[list[AnyMessage], add_messages]


class PipelineState(TurnResults, total=False):
    """Everything the stages read and write (PipelineRequest + PipelineState of the seed): the
    request, the conversation (it persists across turns), the turn's ids, and its results."""

    request: PipelineRequest
    messages: Annotated[list[AnyMessage], add_messages]
    turn: TurnIds


def empty_value(annotation: Any) -> Any:
    """What a key of this type holds before a stage writes it: None for an optional, else the type's empty value."""
    if get_origin(annotation) in (Union, UnionType) and type(None) in get_args(annotation):
        return None
    kind = get_origin(annotation) or annotation
    empties: dict[Any, Any] = {str: "", bool: False, int: 0, list: [], dict: {}}
    if kind not in empties:
        raise TypeError(f"a per-turn key needs an empty value: {annotation!r} has none")
    return empties[kind]


def per_turn_keys(state: type, *, beyond: type | None = None) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The keys of `state` (those `beyond` declares left out) a new turn starts empty: (the plain ones
    with their empty values, the ones with a reducer, which need langgraph.types.Overwrite)."""
    inherited = set(get_type_hints(beyond)) if beyond is not None else set()
    resets: dict[str, Any] = {}
    accumulating: list[str] = []
    for key, annotation in get_type_hints(state, include_extras=True).items():
        if key in inherited:
            continue
        if get_origin(annotation) is Annotated:
            accumulating.append(key)
        else:
            resets[key] = empty_value(annotation)
    return resets, tuple(accumulating)


PER_TURN_RESET, PER_TURN_ACCUMULATING = per_turn_keys(TurnResults)  # begin_turn resets both


class PipelineInput(TypedDict):
    """What a caller sends per turn: the request (the thread keeps the conversation). The
    messages form is the `ragline_chat` graph's (ChatInput)."""

    request: PipelineRequest


class PipelineOutput(TypedDict, total=False):
    """What a caller gets back. No `messages`: a parent graph's own list would get it twice."""

    turn: TurnIds
    rewrite_query: str
    intent: str
    merge_results: list[SearchResult]
    chat_response: ChatResponse | None
    error: PipelineError | None


class ChatInput(TypedDict):
    """The messages-in graph (`ragline_chat`): the conversation, its last message the question."""

    messages: Annotated[list[AnyMessage], add_messages]


class ChatOutput(TypedDict):
    """The messages-out graph: the conversation with the answer appended, its text without
    citation tags (they are in the message's `additional_kwargs["citations"]` and `references`)."""

    messages: Annotated[list[AnyMessage], add_messages]


def checkpoint_types() -> list[type]:
    """Our classes that appear in checkpoints, for the serializer's msgpack allow-list."""
    from ragline.contracts import passages, request

    return [
        passages.SearchResult,
        passages.ChunkType,
        passages.MatchType,
        passages.SearchTarget,
        request.PipelineRequest,
        request.SummaryConfig,
        request.ImageInput,
        request.FallbackStrategy,
        TurnIds,
        HistoryTurn,
        ChatResponse,
        PipelineError,
        ErrorKind,
    ]
