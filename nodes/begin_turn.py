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
from ragline.graph.input_check import Refusal, validate_input
from ragline.graph.request import PipelineRequest, effective_request
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


def _refused(turn: TurnIds, context: RunContext, refusal: Refusal) -> dict[str, Any]:
    """ValidateInput failed: a refusal event, and the turn ends before any search or model call."""
    event = events.error(turn, refusal.message, code=ErrorKind.INPUT_REFUSED.value)
    event.data = {**(event.data or {}), "reason": refusal.reason}
    events.emit(context, event)
    return {"turn": turn, **PER_TURN_RESET, "error": PipelineError(ErrorKind.INPUT_REFUSED, refusal.message)}


def _first_refusal(request: PipelineRequest) -> Refusal | None:
    texts = [request.query, *(image.caption or "" for image in request.images)]
    return next((refusal for text in texts if (refusal := validate_input(text)) is not None), None)


async def begin_turn(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Fix the turn's ids, settle the request, clear last turn's results, append the user message.

    The request is the agent's defaults (run context) overlaid with what the caller set. A host
    hands a built request; plain JSON input (Studio, a parent graph) is validated here, and
    invalid input ends the turn with an error. A question that fails ValidateInput (injection,
    script, control characters) ends it with an `input_refused` error before anything runs.
    """
    context = context_of(runtime)
    turn = turn_ids(context)  # the host's ids; minted only when a host gave none (Studio)
    try:
        request = effective_request(state["request"], context.agent)
    except ValidationError as exc:
        return _invalid(turn, context, exc)
    refusal = _first_refusal(request)
    if refusal is not None:
        return _refused(turn, context, refusal)
    user_message = HumanMessage(
        content=request.query,
        id=turn.user_message_id,
        # the seed's Images (URL + Caption): query_understand writes the description into the caption
        additional_kwargs={"request_id": turn.request_id, "images": [{"url": i.url, "caption": i.caption or ""} for i in request.images]},
    )
    return {"request": request, "turn": turn, **turn_resets(state), "messages": [user_message]}


def turn_resets(state: PipelineState) -> dict[str, Any]:
    """The per-turn keys the previous turn left set, back to empty. A key already empty is not
    written: every write is a checkpoint write (on Redis, a JSON.SET of its own), and a new
    session's first turn would otherwise write all seventeen for nothing."""
    resets: dict[str, Any] = {key: empty for key, empty in PER_TURN_RESET.items() if key in state and state[key] != empty}
    resets.update({key: Overwrite([]) for key in PER_TURN_ACCUMULATING if state.get(key)})
    return resets
