"""MCP OAuth in agent mode: a server the assistant names that needs the user's authorization (the
seed's mcp_oauth_required / mcp_oauth_resolved) pauses the turn until the user grants it.

`model` finds, when it lists the turn's tools, the servers the user has not authorized yet
(mcp_client/oauth.py), announces each with the link to open (`mcp_oauth_required`), and routes to
`authorize`, which interrupts the run like tool approval does: the checkpoint holds the pause, so it
survives a restart. The browser comes back to Ragline's callback on any replica, which stores the
user's tokens; the host then resumes the run (service/runs.py waits for the tokens; a terminal or
Studio resumes when the user says so). `authorize` reads what became of each authorization from the
credential store, whatever the resume value, and says so (`mcp_oauth_resolved`). A server left
unauthorized is not offered again this turn, and none is asked for twice in one turn.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from ragline.contracts import events
from ragline.contracts.agent_state import AgentState
from ragline.contracts.context import RunContext, context_of
from ragline.contracts.state import TurnIds
from ragline.mcp_client.oauth import AuthorizationRequired, McpUser
from ragline.services import services_of

NOT_GRANTED = "the authorization was not finished in time"


def user_of(context: RunContext) -> McpUser:
    return McpUser(context.tenant_id, context.user_id)


def ask(turn: TurnIds, needed: list[AuthorizationRequired], state: AgentState, context: RunContext) -> dict[str, Any]:
    """Announce the servers to authorize (once per turn each): the update that sends `model` to `authorize`."""
    asked = state.get("oauth_asked", [])
    new = [item for item in needed if item.server not in asked]
    for item in new:
        events.emit(context, events.mcp_oauth_required(turn, item.server, item.url))
    waiting = [{"server": item.server, "authorization_url": item.url} for item in new]
    return {"awaiting_authorization": waiting, "oauth_asked": [*asked, *(item.server for item in new)]} if new else {}


async def authorize(state: AgentState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Wait for the user's authorizations (an interrupt), then say what became of each; a server
    not authorized stays out of the turn."""
    waiting = state.get("awaiting_authorization", [])
    if not waiting:
        return {}
    context, services, turn = context_of(runtime), services_of(runtime), state["turn"]
    interrupt({"mcp_oauth_required": waiting})
    flows, user = services.mcp.oauth, user_of(context)
    declined: list[str] = []
    for item in waiting:
        outcome = await flows.outcome(item["server"], user) if flows is not None else None
        authorized, reason = outcome or (False, NOT_GRANTED)
        events.emit(context, events.mcp_oauth_resolved(turn, item["server"], authorized=authorized, reason=reason))
        if not authorized:
            declined.append(item["server"])
    return {"awaiting_authorization": [], "oauth_declined": [*state.get("oauth_declined", []), *declined]}
