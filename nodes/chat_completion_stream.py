"""chat_completion_stream: stream the answer (seed: chat_completion_stream.go).

Options come from the request's summary config; the messages are the system prompt, the earlier
rounds and the current user message. With retrieved contexts, the references event goes out
first, the citation protocol joins the system prompt and the streamed ref tags are expanded into
kb/web tags. Thinking and answer deltas go out as separate events; a truncated answer is flagged
on the terminal event; provider errors become an error event.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from ragline.contracts.context import RunContext, context_of
from ragline.contracts.state import PipelineState
from ragline.generation.answer import answer_turn
from ragline.services import services_of


async def chat_completion_stream(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Stream the model's answer to the prepared messages and record it in the conversation."""
    client = services_of(runtime).chat(state["request"].chat_model)
    return await answer_turn(state, client, context_of(runtime), stream=True)
