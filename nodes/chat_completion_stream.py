"""chat_completion_stream: stream the answer (seed: chat_completion_stream.go).

Options come from the request's summary config; the messages are the system prompt, the earlier
rounds and the current user message. Thinking and answer deltas go out as separate events; a
truncated answer is flagged on the terminal event; provider errors become an error event.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from ragline.graph.context import RunContext, context_of
from ragline.graph.state import PipelineState
from ragline.models.chat import ChatModelError
from ragline.nodes._generation import (
    assistant_message,
    chat_client_for,
    chat_options,
    model_error_update,
    prepare_messages,
    stream_answer,
)


async def chat_completion_stream(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Stream the model's answer to the prepared messages and record it in the conversation."""
    request, turn, context = state["request"], state["turn"], context_of(runtime)
    client = chat_client_for(request)
    try:
        response = await stream_answer(client, prepare_messages(state), chat_options(request), turn, context)
    except ChatModelError as exc:
        return model_error_update(turn, context, exc)
    references = [r for r in state.get("merge_results", []) if isinstance(r, dict)]
    return {"chat_response": response, "messages": [assistant_message(turn, response, references)]}
