"""The answer on LangGraph's `messages` stream, the way a LangChain chat model streams it.

Ragline's model clients are not LangChain chat models, so LangGraph's messages handler would
only see the whole AIMessage when the stage ends. An `AnswerChunks` pushes each answer delta as
an `AIMessageChunk` (the assistant message's id, the stage's node in the metadata, as LangGraph
does for its own chat models) with the citation tags taken out: the text is plain, and each
chunk's citations ride in `additional_kwargs["citations"]`. Thinking deltas go out as chunks with
`additional_kwargs["reasoning_content"]`. The final AIMessage shares the chunks' id, so the
handler does not send the answer twice.

Nothing is built when no one streams messages (the service, the CLI): the check is made once
per answer.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessageChunk

from ragline.citations.plain import PlainText
from ragline.contracts import thread_messages
from ragline.contracts.state import TurnIds


def _messages_stream_attached() -> bool:
    """A run streamed with stream_mode "messages" (or "messages-tuple") has LangGraph's handler in its callbacks."""
    try:
        from langgraph.config import get_config
        from langgraph.pregel._messages import StreamMessagesHandler
    except ImportError:  # pragma: no cover - the handler moved: stream nothing rather than fail the answer
        return False
    try:
        callbacks = get_config().get("callbacks")
    except RuntimeError:  # outside a run
        return False
    handlers: list[Any] = list(getattr(callbacks, "handlers", None) or (callbacks if isinstance(callbacks, list) else []))
    return any(isinstance(handler, StreamMessagesHandler) for handler in handlers)


class AnswerChunks:
    """One answer's chunks on the messages stream (a no-op when nobody streams messages)."""

    def __init__(self, turn: TurnIds) -> None:
        self.message_id = turn.assistant_message_id
        self.active = _messages_stream_attached()
        self.plain = PlainText()

    def answer(self, text: str) -> None:
        if not self.active or not text:
            return
        plain, citations = self.plain.feed(text)
        if plain or citations:
            self._push(thread_messages.answer_chunk(plain, id=self.message_id, citations=[c.as_dict() for c in citations]))

    def thinking(self, text: str) -> None:
        if self.active and text:
            self._push(thread_messages.thinking_chunk(text, id=self.message_id))

    def _push(self, chunk: AIMessageChunk) -> None:
        from langgraph.graph.message import push_message

        push_message(chunk, state_key=None)
