"""What a thread's messages carry besides their text, written and read in one place.

A turn's question and answer live in the checkpoint as LangChain messages. Ragline keeps its own
facts about them in `additional_kwargs` (the place LangChain gives a message's extra data, and
what Studio and `langgraph_sdk` show): the request id that pairs a question with its answer, the
question's images, the answer's references, whether it was stopped or truncated. These
constructors and readers are the only code that knows the keys, as `contracts/events.py` is for events.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage

REASONING_KEY = "reasoning_content"  # where litellm/LangChain adapters put thinking text


REQUEST_ID = "request_id"
IMAGES = "images"
REFERENCES = "references"
CITATIONS = "citations"
STOPPED = "stopped"
TRUNCATED = "truncated"
INJECTED = "injected"
RENDERED_CONTENT = "rendered_content"  # the prompt the model read for this question (an audit)
ASSISTANT_ID = "assistant_id"
ASSISTANT_VERSION = "assistant_version"
INJECTED_SUFFIX = ":injected"  # an injected message's request id: the turn's, then this

Message = TypeVar("Message", bound=BaseMessage)


def question(text: str, *, id: str, request_id: str, images: Iterable[Mapping[str, Any]] = ()) -> HumanMessage:
    """A turn's question. `images`: the seed's Images, each a URL and a caption."""
    kept = [{"url": str(i.get("url") or ""), "caption": str(i.get("caption") or "")} for i in images]
    return HumanMessage(content=text, id=id, additional_kwargs={REQUEST_ID: request_id, IMAGES: kept})


def injected_question(text: str, *, id: str, request_id: str) -> HumanMessage:
    """A message the user sent while an agent turn ran; its round is the turn's own."""
    return HumanMessage(content=text, id=id, additional_kwargs={REQUEST_ID: f"{request_id}{INJECTED_SUFFIX}", INJECTED: True})


def answer(text: str, *, id: str, request_id: str, references: Iterable[Any] = (), stopped: bool = False,
           truncated: bool = False, citations: list[dict[str, Any]] | None = None,
           metadata: Mapping[str, Any] | None = None) -> AIMessage:
    """A turn's answer. `citations`: an answer written without citation tags keeps them as data;
    `metadata`: what the run records on its answer (the assistant and version it ran with)."""
    kwargs: dict[str, Any] = {
        **(metadata or {}),
        REQUEST_ID: request_id,
        REFERENCES: [r.model_dump(mode="json") if hasattr(r, "model_dump") else r for r in references],
        TRUNCATED: truncated,
        STOPPED: stopped,
    }
    if citations is not None:
        kwargs[CITATIONS] = citations
    return AIMessage(content=text, id=id, additional_kwargs=kwargs)


def answer_chunk(text: str, *, id: str, citations: list[dict[str, Any]] | None = None) -> AIMessageChunk:
    """One delta of an answer on the messages stream, its citations as data."""
    return AIMessageChunk(content=text, id=id, additional_kwargs={CITATIONS: citations} if citations else {})


def thinking_chunk(text: str, *, id: str) -> AIMessageChunk:
    """One delta of the model's thinking, where LangChain's chat models put it."""
    return AIMessageChunk(content="", id=id, additional_kwargs={REASONING_KEY: text})


def with_fields(message: Message, **fields: Any) -> Message:
    """The same message (same id, so a state update replaces it) with some of its facts changed."""
    return message.model_copy(update={"additional_kwargs": {**message.additional_kwargs, **fields}})


def request_id_of(message: BaseMessage) -> str:
    """The request id of the turn that wrote the message; empty for one written elsewhere."""
    return str(message.additional_kwargs.get(REQUEST_ID) or "")


def round_of(message: BaseMessage) -> str:
    """The turn a message belongs to: an injected message's round is its turn's."""
    return request_id_of(message).removesuffix(INJECTED_SUFFIX)


def images_of(message: BaseMessage) -> list[dict[str, Any]]:
    raw = message.additional_kwargs.get(IMAGES)
    return [dict(i) if isinstance(i, dict) else {"url": str(i)} for i in raw] if isinstance(raw, list) else []


def references_of(message: BaseMessage) -> list[Any]:
    raw = message.additional_kwargs.get(REFERENCES)
    return list(raw) if isinstance(raw, list | tuple) else []


def is_stopped(message: BaseMessage) -> bool:
    return bool(message.additional_kwargs.get(STOPPED))


def is_truncated(message: BaseMessage) -> bool:
    return bool(message.additional_kwargs.get(TRUNCATED))


def is_injected(message: BaseMessage) -> bool:
    return bool(message.additional_kwargs.get(INJECTED))


def assistant_of(message: BaseMessage) -> tuple[str | None, int | None]:
    """The assistant and version an answer's turn ran with (None, None when it ran without one)."""
    kwargs = message.additional_kwargs
    return kwargs.get(ASSISTANT_ID) or None, kwargs.get(ASSISTANT_VERSION) or None
