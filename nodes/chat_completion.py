"""chat_completion: answer in one call (seed: chat_completion.go).

The same messages, options, citations and references as chat_completion_stream; the model's
whole answer arrives at once and goes out as one answer delta, then the terminal answer event.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from ragline.contracts.context import RunContext, context_of
from ragline.contracts.state import PipelineState
from ragline.generation.answer import answer_turn
from ragline.services import services_of


async def chat_completion(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Call the model once and store its cited answer in `chat_response`."""
    client = services_of(runtime).chat(state["request"].chat_model)
    return await answer_turn(state, client, context_of(runtime), stream=False)
