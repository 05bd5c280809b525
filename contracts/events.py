"""Typed stream events (the seed's StreamResponse) and the constructors nodes build them with.

Nodes never assemble dicts: they call `events.answer(...)`, `events.tool_call(...)` and pass the
result to `emit`, which writes to LangGraph's custom stream (and to the host's sink, if any).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, NoReturn

from langgraph.config import get_stream_writer
from pydantic import BaseModel, Field

from ragline.contracts.context import ExclusiveSink, Framing, RunContext
from ragline.contracts.state import PipelineError, TurnFailed, TurnIds


class ResponseType(StrEnum):
    """Every response_type of the seed's SSE protocol (internal/types/chat.go)."""

    AGENT_QUERY = "agent_query"  # request accepted; carries session and assistant message ids
    THINKING = "thinking"  # reasoning delta
    ANSWER = "answer"  # answer delta; data.truncated when cut by the output limit
    REFERENCES = "references"  # knowledge references, before the answer
    TOOL_CALL = "tool_call"  # tool or progress window opened
    TOOL_RESULT = "tool_result"  # tool or progress window closed; data.success
    COMMAND_OUTPUT = "command_output"
    INSTALL_OUTPUT = "install_output"
    REFLECTION = "reflection"
    SESSION_TITLE = "session_title"
    ERROR = "error"  # the whole turn failed (done=True: terminal)
    COMPLETE = "complete"  # end of stream
    TOOL_APPROVAL_REQUIRED = "tool_approval_required"
    TOOL_APPROVAL_RESOLVED = "tool_approval_resolved"
    MCP_OAUTH_REQUIRED = "mcp_oauth_required"
    MCP_OAUTH_RESOLVED = "mcp_oauth_resolved"
    MEMORY_RECALLED = "memory_recalled"
    ARTIFACTS_PENDING = "artifacts_pending"
    USER_MESSAGE_INJECTED = "user_message_injected"
    CONTEXT_COMPACTED = "context_compacted"
    INSTALL_PROMPT = "install_prompt"
    STOP = "stop"  # the user stopped the run (built by the host)


class StreamResponse(BaseModel):
    id: str = Field(description="The request id of the turn.")
    response_type: ResponseType
    content: str = ""
    done: bool = False
    knowledge_references: list[dict[str, Any]] | None = None
    session_id: str | None = None
    assistant_message_id: str | None = None
    data: dict[str, Any] | None = None


class ProgressWindow(StrEnum):
    """Front-end progress cards opened by tool_call and closed by tool_result (progress.go)."""

    QUERY_UNDERSTAND = "query_understand"
    KNOWLEDGE_SEARCH = "knowledge_search"


def _base(turn: TurnIds, kind: ResponseType, **fields: Any) -> StreamResponse:
    return StreamResponse(
        id=turn.request_id,
        response_type=kind,
        session_id=turn.session_id,
        assistant_message_id=turn.assistant_message_id,
        **fields,
    )


def agent_query(turn: TurnIds, query: str, *, title_pending: bool = False) -> StreamResponse:
    """The first event: the ids a client needs to resume, and whether a session title will follow."""
    data: dict[str, Any] = {"request_id": turn.request_id}
    if title_pending:
        data["title_pending"] = True
    return _base(turn, ResponseType.AGENT_QUERY, content=query, data=data)


def answer(turn: TurnIds, text: str, *, done: bool = False, truncated: bool = False, segment: int | None = None) -> StreamResponse:
    """An answer delta (the terminal one with done). `segment`: agent mode's round the text was
    written in; a `thought` naming that segment later marks it superseded (not the answer)."""
    data: dict[str, Any] = {"truncated": True} if truncated else {}
    if segment is not None:
        data["segment"] = segment
    return _base(turn, ResponseType.ANSWER, content=text, done=done, data=data or None)


def thinking(turn: TurnIds, text: str, *, done: bool = False) -> StreamResponse:
    return _base(turn, ResponseType.THINKING, content=text, done=done)


def references(turn: TurnIds, items: list[dict[str, Any]]) -> StreamResponse:
    return _base(turn, ResponseType.REFERENCES, knowledge_references=items)


def tool_call(turn: TurnIds, window: ProgressWindow, arguments: dict[str, Any] | None = None) -> StreamResponse:
    return _base(
        turn,
        ResponseType.TOOL_CALL,
        data={"tool_name": window.value, "tool_call_id": f"{turn.request_id}:{window.value}", "arguments": arguments or {}},
    )


def thought(turn: TurnIds, text: str, *, segment: int) -> StreamResponse:
    """Agent mode's EventAgentThought: what the model wrote before asking for tools. Sent as the seed
    sends it, a `thinking` frame, done; it supersedes the answer segment `segment` streamed in the
    same round (the seed's answerSegments: an introduction is not the answer)."""
    return _base(turn, ResponseType.THINKING, content=text, done=True, data={"thought": True, "superseded_segment": segment})


def agent_tool_call(turn: TurnIds, call_id: str, name: str, arguments: dict[str, Any]) -> StreamResponse:
    """Agent mode: the model called a tool (the card opens)."""
    return _base(turn, ResponseType.TOOL_CALL, data={"tool_name": name, "tool_call_id": call_id, "arguments": arguments})


def agent_tool_result(turn: TurnIds, call_id: str, name: str, *, success: bool, output: str = "",
                      error: str | None = None, details: dict[str, Any] | None = None) -> StreamResponse:
    """Agent mode: a tool's result (the card closes); a failure is success=false with its error, never an `error` event."""
    data: dict[str, Any] = {"tool_name": name, "tool_call_id": call_id, "success": success, "output": output}
    if error:
        data["error"] = error
    if details:
        data["details"] = details
    return _base(turn, ResponseType.TOOL_RESULT, data=data)


def tool_approval_required(turn: TurnIds, call_id: str, name: str, arguments: dict[str, Any]) -> StreamResponse:
    """Agent mode: a call to a tool its assistant marks as needing approval waits for the user's decision."""
    data = {"tool_call_id": call_id, "tool_name": name, "arguments": arguments}
    return _base(turn, ResponseType.TOOL_APPROVAL_REQUIRED, content=f"{name} waits for your approval", done=True, data=data)


def tool_approval_resolved(turn: TurnIds, call_id: str, name: str, *, approved: bool, reason: str = "") -> StreamResponse:
    """Agent mode: the user approved the call (it runs now) or denied it (the model is told, and goes on without it)."""
    data = {"tool_call_id": call_id, "tool_name": name, "approved": approved, "reason": reason}
    return _base(turn, ResponseType.TOOL_APPROVAL_RESOLVED, content=f"{name} {'approved' if approved else 'denied'}", done=True, data=data)


def mcp_oauth_required(turn: TurnIds, server: str, authorization_url: str) -> StreamResponse:
    """Agent mode: an MCP server the assistant names needs the user's authorization; the turn waits
    until the user has opened the link and granted (or refused) access."""
    data = {"server": server, "authorization_url": authorization_url}
    return _base(turn, ResponseType.MCP_OAUTH_REQUIRED, content=f"{server} needs your authorization", done=True, data=data)


def mcp_oauth_resolved(turn: TurnIds, server: str, *, authorized: bool, reason: str = "") -> StreamResponse:
    """Agent mode: the user granted access (the server's tools are offered now) or did not (the turn goes on without them)."""
    data = {"server": server, "authorized": authorized, "reason": reason}
    return _base(turn, ResponseType.MCP_OAUTH_RESOLVED, content=f"{server} {'authorized' if authorized else 'not authorized'}", done=True, data=data)


def user_message_injected(turn: TurnIds, text: str) -> StreamResponse:
    """Agent mode took a message the user sent while it ran: the model reads it at this step."""
    return _base(turn, ResponseType.USER_MESSAGE_INJECTED, content=text, done=True)


def context_compacted(turn: TurnIds, *, rounds: int, tokens_before: int, tokens_after: int) -> StreamResponse:
    """Agent mode summarised its earlier tool rounds: the loop's prompt neared its token budget."""
    data = {"rounds": rounds, "tokens_before": tokens_before, "tokens_after": tokens_after}
    return _base(turn, ResponseType.CONTEXT_COMPACTED, content=f"{rounds} earlier tool rounds summarised", done=True, data=data)


def reflection(turn: TurnIds, text: str, *, data: dict[str, Any] | None = None) -> StreamResponse:
    """Agent mode's note on its own run (a limit reached: the model now answers with what it has)."""
    return _base(turn, ResponseType.REFLECTION, content=text, done=True, data=data)


def tool_result(turn: TurnIds, window: ProgressWindow, *, success: bool, output: dict[str, Any] | None = None, error: str | None = None) -> StreamResponse:
    data: dict[str, Any] = {"tool_name": window.value, "tool_call_id": f"{turn.request_id}:{window.value}", "success": success}
    if output:
        data["output"] = output
    if error:
        data["error"] = error
    return _base(turn, ResponseType.TOOL_RESULT, data=data)


def error(turn: TurnIds, message: str, *, code: str, done: bool = True) -> StreamResponse:
    return _base(turn, ResponseType.ERROR, content=message, done=done, data={"code": code})


def fail_turn(context: RunContext, turn: TurnIds, failure: PipelineError, *, card: ProgressWindow | None = None,
              data: dict[str, Any] | None = None) -> NoReturn:
    """End the turn on `failure`: close the progress card the failing stage runs in (failed), send
    the error event (with `data` beside its code), raise TurnFailed."""
    if card is not None:
        emit(context, tool_result(turn, card, success=False, error=failure.message))
    event = error(turn, failure.message, code=failure.kind.value)
    if data:
        event.data = {**(event.data or {}), **data}
    emit(context, event)
    raise TurnFailed(failure)


def session_title(turn: TurnIds, title: str) -> StreamResponse:
    return _base(turn, ResponseType.SESSION_TITLE, content=title, done=True)


def stop(turn: TurnIds) -> StreamResponse:
    return _base(turn, ResponseType.STOP, done=True)


def complete(turn: TurnIds, *, stopped: bool = False) -> StreamResponse:
    return _base(turn, ResponseType.COMPLETE, done=True, data={"stopped": True} if stopped else None)


def as_json(event: StreamResponse) -> dict[str, Any]:
    """The event as every host writes it (LangGraph's stream, the answer's log, SSE): plain JSON, unset fields left out."""
    return event.model_dump(mode="json", exclude_none=True)


def emit(context: RunContext | None, event: StreamResponse) -> None:
    """Deliver an event: LangGraph's custom stream, plus the host's sink when it gave one (only the
    sink when it is an ExclusiveSink)."""
    _deliver(context, event)
    if _ends_a_driverless_turn(context, event):
        _deliver(context, _complete_after(event))


def _deliver(context: RunContext | None, event: StreamResponse) -> None:
    sink = context.host.event_sink if context is not None else None
    if isinstance(sink, ExclusiveSink):
        sink(event)
        return
    try:
        writer = get_stream_writer()
    except RuntimeError:  # called outside a graph run (e.g. by a host after the run)
        writer = None
    if writer is not None:
        writer(as_json(event))  # plain JSON: Studio and SSE serialise it as is
    if sink is not None:
        sink(event)


def frames_itself(context: RunContext | None) -> bool:
    """Whether the graph sends its turn's frame (RunHost.framing): no driver hosts the run."""
    return context is None or context.host.framing is Framing.GRAPH


def _ends_a_driverless_turn(context: RunContext | None, event: StreamResponse) -> bool:
    """A graph that frames its own turn sends the last frame itself: `complete` after the terminal
    answer or error (`begin_turn` sends the first)."""
    return frames_itself(context) and event.done and event.response_type in (ResponseType.ANSWER, ResponseType.ERROR)


def _complete_after(event: StreamResponse) -> StreamResponse:
    stopped = event.response_type == ResponseType.ANSWER and bool((event.data or {}).get("stopped"))
    return complete(TurnIds(event.session_id or "", event.id or "", "", event.assistant_message_id or ""), stopped=stopped)


def memory_recalled(turn: TurnIds, items: list[dict[str, Any]]) -> StreamResponse:
    """The long-term memories injected this turn (memory_recall), so the client can show them."""
    return _base(turn, ResponseType.MEMORY_RECALLED, data={"memories": items})
