"""Agent mode's state: the pipeline's (the request, the turn, the conversation, the answer) plus
the loop's own per-turn keys, all plain JSON so a checkpoint holds the whole loop.

The citation registry is not kept: it is rebuilt in every node from `sources` (every passage given
to the model this turn, in the order it was registered), which gives each passage the alias it had
when the model read it (Registry.register_context). So the turn has one registry across rounds,
and a run resumed from its checkpoint cites exactly as the one that started it.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any

from ragline.contracts.state import PipelineState, per_turn_keys


class AgentState(PipelineState, total=False):
    conversation: Annotated[list[dict[str, Any]], operator.add]  # this turn's model messages after the prompt: assistant and tool
    sources: Annotated[list[dict[str, Any]], operator.add]  # every passage given to the model (SourceChunk as JSON), alias order
    tool_images: Annotated[list[dict[str, str]], operator.add]  # {"chunk_id", "url"} of the images those passages hold, no bytes
    pending_calls: list[dict[str, Any]]  # the last reply's tool calls, still to run (ToolCallRequest as JSON)
    awaiting_approval: list[str]  # ids of those calls that wait for the user's approval (nodes/agent/approval.py)
    denied: dict[str, str]  # ids of calls the user denied, with the reason given: answered with it, never run
    awaiting_authorization: list[dict[str, str]]  # MCP servers whose authorization the turn waits for: {"server", "authorization_url"}
    oauth_asked: list[str]  # MCP servers this turn asked the user to authorize (never asked twice in a turn)
    oauth_declined: list[str]  # of those, the ones left unauthorized: their tools are not offered this turn
    rounds: int  # model replies that asked for tools
    tool_calls_made: int  # tool calls answered, every round together
    limit: str  # "" or the limit reached ("max_rounds", "max_tool_calls"): the model answers without tools
    answer_text: str  # the final reply, decoded (ref tags expanded)
    answer_thinking: str
    finish_reason: str | None


AGENT_RESETS, AGENT_ACCUMULATING = per_turn_keys(AgentState, beyond=PipelineState)  # the loop's own keys, reset each turn
