"""begin_turn: start one user turn on the session's thread.

Replaces the per-request ChatManage the seed's KnowledgeQA builds: fixes the turn's ids (kept in
the checkpoint so a resumed run keeps them), resets every per-turn key so nothing leaks from the
previous turn, and records the user's message in the conversation at once (IsCompleted=true).
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.runtime import Runtime
from langgraph.types import Overwrite
from pydantic import ValidationError

from ragline.graph import events
from ragline.graph.context import RunContext, context_of
from ragline.graph.request import effective_request
from ragline.graph.state import (
    PER_TURN_ACCUMULATING,
    PER_TURN_RESET,
    ErrorKind,
    PipelineError,
    PipelineState,
    TurnIds,
)
from ragline.graph.turn import turn_ids


def _invalid(turn: TurnIds, context: RunContext, exc: ValidationError) -> dict[str, Any]:
    problem = exc.errors()[0]
    where = ".".join(str(part) for part in problem.get("loc", ())) or "request"
    message = f"invalid request: {where}: {problem.get('msg', 'invalid value')}"
    events.emit(context, events.error(turn, message, code=ErrorKind.INVALID_INPUT.value))
    return {"turn": turn, **PER_TURN_RESET, "error": PipelineError(ErrorKind.INVALID_INPUT, message)}


async def begin_turn(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Fix the turn's ids, settle the request, clear last turn's results, append the user message.

    The request is the agent's defaults (run context) overlaid with what the caller set. A host
    hands a built request; plain JSON input (Studio, a parent graph) is validated here, and
    invalid input ends the turn with an error.
    """
    context = context_of(runtime)
    turn = turn_ids(context)  # the host's ids; minted only when a host gave none (Studio)
    try:
        request = effective_request(state["request"], context.agent)
    except ValidationError as exc:
        return _invalid(turn, context, exc)
    user_message = HumanMessage(
        content=request.query,
        id=turn.user_message_id,
        additional_kwargs={"request_id": turn.request_id, "images": [image.url for image in request.images]},
    )
    return {
        "request": request,
        "turn": turn,
        **PER_TURN_RESET,
        **{key: Overwrite([]) for key in PER_TURN_ACCUMULATING},
        "messages": [user_message],
    }
