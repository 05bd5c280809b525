"""begin_turn: start one user turn on the session's thread.

Replaces the per-request ChatManage the seed's KnowledgeQA builds: fixes the turn's ids (kept in
the checkpoint so a resumed run keeps them), resets every per-turn key so nothing leaks from the
previous turn, and records the user's message in the conversation at once (IsCompleted=true).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any, NoReturn, cast

from langchain_core.messages import AnyMessage, HumanMessage
from langgraph.runtime import Runtime
from langgraph.types import Overwrite
from pydantic import ValidationError

from ragline.contracts import events, thread_messages
from ragline.contracts.context import RunContext, context_of, turn_ids
from ragline.contracts.request import PipelineRequest, effective_request
from ragline.contracts.state import (
    PER_TURN_ACCUMULATING,
    PER_TURN_RESET,
    ErrorKind,
    PipelineError,
    PipelineState,
    TurnIds,
)
from ragline.generation.input_check import Refusal, validate_input
from ragline.retrieval.errors import RetrievalError
from ragline.services import services_in


def _invalid(turn: TurnIds, context: RunContext, message: str) -> NoReturn:
    events.fail_turn(context, turn, PipelineError(ErrorKind.INVALID_INPUT, message))


def _invalid_request(turn: TurnIds, context: RunContext, exc: ValidationError) -> NoReturn:
    problem = exc.errors()[0]
    where = ".".join(str(part) for part in problem.get("loc", ())) or "request"
    _invalid(turn, context, f"invalid request: {where}: {problem.get('msg', 'invalid value')}")


def _refused(turn: TurnIds, context: RunContext, refusal: Refusal) -> NoReturn:
    """ValidateInput failed: a refusal event, and the turn ends before any search or model call."""
    events.fail_turn(context, turn, PipelineError(ErrorKind.INPUT_REFUSED, refusal.message), data={"reason": refusal.reason})


def _first_refusal(request: PipelineRequest) -> Refusal | None:
    texts = [request.query, *(image.caption or "" for image in request.images)]
    return next((refusal for text in texts if (refusal := validate_input(text)) is not None), None)


_KB_ID = re.compile(r"[0-9a-f]{32}")


async def _with_kb_ids(request: PipelineRequest, context: RunContext) -> PipelineRequest:
    """Knowledge bases named by name, as the CLI takes them (Studio, a parent graph), as ids. The
    service passes ids it has authorized: those need no lookup. A name the tenant has no base of
    is left as given, and the search reports it as any unknown base."""
    names = [kb for kb in request.knowledge_base_ids if not _KB_ID.fullmatch(kb)]
    services = services_in(context)
    if not names or services is None:
        return request
    knowledge_bases = services.retrieval.knowledge_bases

    def resolve() -> dict[str, str]:
        found: dict[str, str] = {}
        for name in names:
            try:
                found[name] = knowledge_bases.get_by_name(name, context.principal()).id
            except RetrievalError:  # not a name: perhaps an id of another shape
                pass
        return found

    ids = await asyncio.to_thread(resolve)  # the catalog is a synchronous store
    if not ids:
        return request
    return request.model_copy(update={"knowledge_base_ids": tuple(dict.fromkeys(ids.get(kb, kb) for kb in request.knowledge_base_ids))})


def _missing_request(turn: TurnIds, context: RunContext) -> NoReturn:
    _invalid(turn, context, 'invalid input: this graph takes {"request": {"query": "...", ...}}; '
                            'for {"messages": [...]} use the ragline_chat graph')


async def begin_turn(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Fix the turn's ids, settle the request, clear last turn's results, append the user message.

    The request is the agent's defaults (run context) overlaid with what the caller set. A host
    hands a built request; plain JSON input (Studio, a parent graph) is validated here, and
    invalid input ends the turn with an error (TurnFailed). A question that fails ValidateInput
    (injection, script, control characters) ends it with an `input_refused` error before anything runs.
    """
    context = context_of(runtime)
    turn = turn_ids(context)  # the host's ids; minted only when a host gave none (Studio)
    _open_driverless_turn(turn, context, _query_of(state.get("request")))
    if "request" not in state:
        _missing_request(turn, context)
    request = await _settled(state["request"], turn, context)
    # the seed's Images (URL + Caption): query_understand writes the description into the caption
    user_message = thread_messages.question(request.query, id=turn.user_message_id, request_id=turn.request_id,
                                            images=[{"url": i.url, "caption": i.caption} for i in request.images])
    return {"request": request, "turn": turn, **turn_resets(state), "messages": [user_message]}


async def begin_chat_turn(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """begin_turn of the messages graph (`ragline_chat`): the question is the conversation's last
    message, every setting comes from the agent configuration, and the answer is written without
    citation tags. The question keeps its id (a parent's list is merged by id) and is marked with
    the turn's request id, which pairs it with its answer in later rounds."""
    context = context_of(runtime)
    turn = turn_ids(context)
    question = _open_question(state.get("messages", []))
    _open_driverless_turn(turn, context, question.text if question is not None else "")
    if question is None:
        _invalid(turn, context, 'invalid input: {"messages": [...]} must end with the user\'s question (a human message)')
    request = await _settled({"query": question.text}, turn, context)
    marked = thread_messages.with_fields(question, **{thread_messages.REQUEST_ID: turn.request_id})
    return {"request": request, "turn": turn, **turn_resets(state), "plain_reply": True, "messages": [marked]}


def _query_of(request: PipelineRequest | dict[str, Any] | None) -> str:
    return str(request.get("query", "") if isinstance(request, dict) else getattr(request, "query", ""))


def _open_driverless_turn(turn: TurnIds, context: RunContext, query: str) -> None:
    """`agent_query` first, as a turn driver would send it, when the graph frames its own turn
    (RunHost.framing: Studio, a parent graph, an agent's tool); `complete` closes it (events.emit)."""
    if events.frames_itself(context):
        events.emit(context, events.agent_query(turn, query))


def _open_question(messages: list[AnyMessage]) -> HumanMessage | None:
    """The last message when it is a human message no turn has answered yet."""
    last = messages[-1] if messages else None
    if isinstance(last, HumanMessage) and not thread_messages.request_id_of(last) and last.text.strip():
        return last
    return None


async def _settled(request: PipelineRequest | dict[str, Any], turn: TurnIds, context: RunContext) -> PipelineRequest:
    """The turn's request; an invalid or refused one ends the turn (TurnFailed)."""
    try:
        settled = await _with_kb_ids(effective_request(request, context.agent), context)
    except ValidationError as exc:
        _invalid_request(turn, context, exc)
    refusal = _first_refusal(settled)
    if refusal is not None:
        _refused(turn, context, refusal)
    return settled


def turn_resets(state: PipelineState) -> dict[str, Any]:
    """The per-turn keys the previous turn left set, back to empty. A key already empty is not
    written: every write is a checkpoint write (on Redis, a JSON.SET of its own), and a new
    session's first turn would otherwise write all seventeen for nothing."""
    written = cast(dict[str, Any], state)
    resets: dict[str, Any] = {key: empty for key, empty in PER_TURN_RESET.items() if key in written and written[key] != empty}
    resets.update({key: Overwrite([]) for key in PER_TURN_ACCUMULATING if state.get(key)})
    return resets
