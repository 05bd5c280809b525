"""chat_completion: answer in one call (seed: chat_completion.go).

The same messages and options as the streaming stage; the whole answer arrives at once and is
sent as a single terminal answer event, so every preset is observable the same way.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from ragline.graph import events
from ragline.graph.context import RunContext, context_of
from ragline.graph.state import ChatResponse, PipelineState
from ragline.models.chat import ChatModelError
from ragline.nodes._generation import (
    TRUNCATED_EMPTY_HINT,
    assistant_message,
    chat_client_for,
    chat_options,
    is_truncation,
    model_error_update,
    prepare_messages,
)


async def chat_completion(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Call the model once and store its answer in `chat_response`."""
    request, turn, context = state["request"], state["turn"], context_of(runtime)
    client = chat_client_for(request)
    try:
        result = await client.chat(prepare_messages(state), chat_options(request))
    except ChatModelError as exc:
        return model_error_update(turn, context, exc)
    truncated = is_truncation(result.finish_reason)
    content = result.content if (result.content.strip() or not truncated) else TRUNCATED_EMPTY_HINT
    response = ChatResponse(
        content=content,
        thinking=result.thinking,
        finish_reason=result.finish_reason,
        truncated=truncated,
        model=client.model,
        usage=result.usage,
    )
    if result.thinking:
        events.emit(context, events.thinking(turn, result.thinking, done=True))
    events.emit(context, events.answer(turn, content, done=True, truncated=truncated))
    return {"chat_response": response, "messages": [assistant_message(turn, response)]}
