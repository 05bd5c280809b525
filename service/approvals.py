"""What a paused agent-mode run waits on: the user's decisions on tool calls (tool approval), or
their authorization of MCP servers (MCP OAuth).

For approval the graph pauses with an interrupt naming the calls (nodes/agent/approval.py); the run
manager records them in the run registry, where a decision posted to any replica lands (POST
.../approvals), and resumes the graph once every call is decided. A call left undecided too long is
denied. For MCP OAuth (nodes/agent/authorize.py) the interrupt names the servers; the browser's return to
any replica stores the user's tokens (or their refusal), which the run manager sees in the
credential store, and resumes the graph once each server is settled, or the time is up.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from ragline.mcp_client.oauth import McpUser, OAuthFlows
from ragline.service.registry import Decision, RunRegistry


def waiting_calls(interrupts: list[Any]) -> list[str]:
    """The tool call ids the graph's interrupts wait on."""
    return [item["tool_call_id"] for paused in interrupts if isinstance(paused, dict) for item in paused.get("tool_approval_required", [])]


async def await_decisions(registry: RunRegistry, message_id: str, waiting: list[str], *, timeout_s: float, poll_s: float,
                          stopped: Callable[[], bool]) -> dict[str, dict[str, Any]] | None:
    """Each waiting call's decision as the graph's resume value ({"approved", "reason"} per call id),
    once all are decided or timeout_s has passed (the rest denied); None when the run is stopped first."""
    await registry.await_approval(message_id, waiting)
    deadline = time.monotonic() + timeout_s
    while not stopped():
        decided = await registry.decisions(message_id)
        if all(decided.get(call_id) is not None for call_id in waiting) or time.monotonic() >= deadline:
            late = Decision(False, f"no decision within {timeout_s:g} s")
            return {call_id: asdict(decided.get(call_id) or late) for call_id in waiting}
        await asyncio.sleep(poll_s)
    return None


def waiting_authorizations(interrupts: list[Any]) -> list[str]:
    """The MCP servers the graph's interrupts wait for the user to authorize."""
    return [item["server"] for paused in interrupts if isinstance(paused, dict) for item in paused.get("mcp_oauth_required", [])]


async def await_authorizations(flows: OAuthFlows | None, user: McpUser, servers: list[str], *, timeout_s: float, poll_s: float,
                               stopped: Callable[[], bool]) -> dict[str, list[str]] | None:
    """The graph's resume once the user granted or refused each server, or timeout_s has passed
    ({"authorized": [...]}; the graph reads the outcome from the store itself); None when the run is stopped first."""
    deadline = time.monotonic() + timeout_s
    while not stopped():
        outcomes = {server: await flows.outcome(server, user) if flows is not None else (False, "") for server in servers}
        if all(outcome is not None for outcome in outcomes.values()) or time.monotonic() >= deadline:
            return {"authorized": [server for server, outcome in outcomes.items() if outcome and outcome[0]]}
        await asyncio.sleep(poll_s)
    return None
