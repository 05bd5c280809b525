"""The agent turn's start: the pipeline's begin_turn, and the loop's per-turn keys back to empty."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from ragline.contracts.agent_state import AGENT_ACCUMULATING, AGENT_RESETS, AgentState
from ragline.contracts.context import RunContext
from ragline.nodes.begin_turn import begin_turn


async def begin(state: AgentState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """The pipeline's begin_turn (ids, the settled request, the refusal check, the user message),
    and the loop's per-turn keys back to empty."""
    update = await begin_turn(state, runtime)  # a refused or invalid request raises TurnFailed there
    resets = {key: empty for key, empty in AGENT_RESETS.items() if state.get(key, empty) != empty}
    resets.update({key: Overwrite([]) for key in AGENT_ACCUMULATING if state.get(key)})
    return {**update, **resets}
