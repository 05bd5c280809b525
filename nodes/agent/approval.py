"""Tool approval in agent mode: a call to a tool the assistant marks as needing approval waits for
the user (the seed's tool_approval_required / tool_approval_resolved).

The `model` node announces each such call (`tool_approval_required`) and routes to `approval`,
which interrupts the run with LangGraph's `interrupt`. The checkpoint then holds the waiting calls,
so a pending approval survives a restart, and whoever hosts the graph resumes it with
`Command(resume=...)`: the HTTP service when a decision arrives from any replica (service/runs.py),
Studio's resume form, a parent graph. The resume value decides the calls; `tool_approval_resolved`
says how each was decided, and `tools` answers a denied call with the refusal instead of running it.

Resume values: `true` / `false` (every waiting call), `{"approved": bool, "reason": str}` (every
call), or a mapping from tool call id to either. A call the value does not decide is denied.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from ragline.contracts import events
from ragline.contracts.agent_state import AgentState
from ragline.contracts.context import RunContext, context_of
from ragline.contracts.state import TurnIds
from ragline.mcp_client.names import split_name
from ragline.models.tool_calls import ToolCallRequest

NO_DECISION = "no decision was given"


def needs_approval(tool_name: str, approval_tools: tuple[str, ...]) -> bool:
    """Whether the assistant marks this tool as needing approval: by its name, or (an MCP tool) by its server's."""
    return tool_name in approval_tools or split_name(tool_name)[0] in approval_tools


def announce(turn: TurnIds, calls: list[ToolCallRequest], arguments: dict[str, dict[str, Any]], context: RunContext) -> list[str]:
    """The ids of the calls that wait for approval, each announced (tool_approval_required).
    A call that cannot run anyway (malformed arguments) does not wait: `tools` answers its error."""
    waiting = [call for call in calls if needs_approval(call.name, context.approval_tools) and not call.error]
    for call in waiting:
        events.emit(context, events.tool_approval_required(turn, call.id, call.name, arguments[call.id]))
    return [call.id for call in waiting]


def _decision(value: Any) -> tuple[bool, str] | None:
    if isinstance(value, bool):
        return value, ""
    if isinstance(value, dict) and isinstance(value.get("approved"), bool):
        return value["approved"], str(value.get("reason") or "")
    return None


def decisions_from(value: Any, call_ids: list[str]) -> dict[str, tuple[bool, str]]:
    """Each waiting call's (approved, reason) from a resume value; a call it does not decide is denied."""
    for_all = _decision(value)
    if for_all is not None:
        return {call_id: for_all for call_id in call_ids}
    given = value if isinstance(value, dict) else {}
    return {call_id: _decision(given.get(call_id)) or (False, NO_DECISION) for call_id in call_ids}


async def approval(state: AgentState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Wait for the user's decision on the calls `model` announced (an interrupt), then say how
    each was decided; a denied call is answered with its reason by `tools`, never run."""
    waiting = state.get("awaiting_approval", [])
    if not waiting:
        return {}
    context, turn = context_of(runtime), state["turn"]
    calls = {call["id"]: call for call in state.get("pending_calls", [])}
    value = interrupt({"tool_approval_required": [{"tool_call_id": call_id, "tool_name": calls[call_id]["name"],
                                                   "arguments": calls[call_id]["arguments"]} for call_id in waiting]})
    decided = decisions_from(value, waiting)
    for call_id, (approved, reason) in decided.items():
        events.emit(context, events.tool_approval_resolved(turn, call_id, calls[call_id]["name"], approved=approved, reason=reason))
    return {"awaiting_approval": [], "denied": {call_id: reason for call_id, (approved, reason) in decided.items() if not approved}}
