"""load_history: the conversation's earlier rounds (seed: load_history.go, common.go).

Rounds are the thread's messages paired by request id. The user side is the original question
(never the rendered prompt with its contexts) with the captions of its images, so a later round
can refer to a picture no model sees again; the assistant side has its think blocks stripped
and keeps its knowledge references for merge_history.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.runtime import Runtime

from ragline import defaults
from ragline.citations.messages import message_text
from ragline.contracts import thread_messages
from ragline.contracts.context import RunContext
from ragline.contracts.state import HistoryTurn, PipelineState
from ragline.models.think import strip_think


def _with_captions(message: AnyMessage) -> str:
    """The question plus its images' captions (seed: history adds the Images' Caption on the user side)."""
    captions = [str(i.get("caption") or "").strip() for i in thread_messages.images_of(message)]
    lines = [f"[image: {caption}]" for caption in captions if caption]
    return "\n".join([message_text(message), *lines]) if lines else message_text(message)


def pair_history(messages: Sequence[AnyMessage], max_rounds: int, current_request_id: str | None = None) -> list[HistoryTurn]:
    """The last `max_rounds` complete rounds, oldest first."""
    if max_rounds <= 0:
        return []
    recent = list(messages)[-(max_rounds * 2 + defaults.HISTORY_FETCH_SLACK) :]
    questions: dict[str, str] = {}
    rounds: list[HistoryTurn] = []
    unmarked_question = ""  # a conversation written elsewhere (Studio's chat, a parent graph) has no request ids
    for index, message in enumerate(recent):
        request_id = thread_messages.request_id_of(message)
        if not request_id:
            request_id, unmarked_question = _unmarked_round(message, index, unmarked_question)
        if not request_id or request_id == current_request_id:
            continue
        if isinstance(message, HumanMessage):
            questions[request_id] = _with_captions(message)
        elif isinstance(message, AIMessage) and request_id in questions:
            rounds.append(
                HistoryTurn(
                    request_id=request_id,
                    query=questions.pop(request_id),
                    answer=strip_think(message_text(message)),
                    references=tuple(thread_messages.references_of(message)),
                )
            )
    return rounds[-max_rounds:]


def _unmarked_round(message: AnyMessage, index: int, open_question: str) -> tuple[str, str]:
    """A round key for a message without a request id: a human message opens one, the next
    answer with text closes it (an agent's tool-call message is no answer)."""
    if isinstance(message, HumanMessage):
        key = f"unmarked:{index}"
        return key, key
    if isinstance(message, AIMessage) and open_question and message_text(message).strip():
        return open_question, ""
    return "", open_question


async def load_history(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Load up to max_history_rounds earlier rounds into `history`; <= 0 rounds loads none."""
    request = state["request"]
    turn = state.get("turn")
    history = pair_history(state.get("messages", []), request.max_history_rounds, turn.request_id if turn else None)
    return {"history": history}
