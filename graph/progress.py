"""The nodes that open and close a progress window (the seed's progress cards, progress.go).

A window is a run of stages shown to the user as one card: `tool_call` when the first of them
starts, `tool_result` when the graph leaves them. Each card is a subgraph (graph/cards.py) whose
first node is `open_<window>` and whose last is `close_<window>`, so the card's life is part of the
topology Studio draws. A stage that fails closes its card as failed before it raises
(events.fail_turn); a card left open by a stage that raised otherwise, or by a run its host
cancelled, is closed as failed by the turn driver (graph/turn.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langgraph.runtime import Runtime

from ragline.contracts import events
from ragline.contracts.context import RunContext, context_of
from ragline.contracts.events import ProgressWindow
from ragline.contracts.state import PipelineState

WindowNode = Callable[..., Awaitable[dict[str, Any]]]  # a node of any card's graph


def open_name(window: ProgressWindow) -> str:
    return f"open_{window.value}"


def close_name(window: ProgressWindow) -> str:
    return f"close_{window.value}"


def open_window(window: ProgressWindow) -> WindowNode:
    async def node(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        events.emit(context_of(runtime), events.tool_call(state["turn"], window, {"query": state["request"].query}))
        return {}

    node.__name__ = open_name(window)
    node.__doc__ = f"Open the {window.value} progress card (tool_call) before its first stage runs."
    return node


def close_window(window: ProgressWindow, result_keys: tuple[str, ...]) -> WindowNode:
    async def node(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        error = state.get("error")  # only "nothing found" reaches here, an outcome: a failing stage closed the card itself
        output = {key: state[key] for key in result_keys if key in state}  # type: ignore[literal-required]
        message = error.message if error is not None else None
        events.emit(context_of(runtime), events.tool_result(state["turn"], window, success=True, output=output, error=message))
        return {}

    node.__name__ = close_name(window)
    node.__doc__ = f"Close the {window.value} progress card (tool_result) on every way out of it."
    return node
