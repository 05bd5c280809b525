"""chat_completion_stream: stream the answer (seed: chat_completion_stream.go).

Options come from the request's summary config; the messages are the system prompt, the earlier
rounds and the current user message. With retrieved contexts, the references event goes out
first, contexts reach the model under per-answer aliases with the citation protocol, and the
streamed ref tags are expanded into kb/web tags. Thinking and answer deltas go out as separate
events; a truncated answer is flagged on the terminal event; provider errors become an error event.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from ragline.citations import Registry, references_payload
from ragline.graph import events
from ragline.graph.context import RunContext, context_of
from ragline.graph.state import PipelineState
from ragline.models.chat import ChatModelError
from ragline.nodes._generation import (
    assistant_message,
    chat_client_for,
    chat_options,
    model_error_update,
    prepare_cited_messages,
    prepare_messages,
    source_chunks,
    stream_answer,
)


async def chat_completion_stream(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Stream the model's answer to the prepared messages and record it in the conversation."""
    request, turn, context = state["request"], state["turn"], context_of(runtime)
    client = chat_client_for(request)
    results = list(state.get("merge_results", []))
    registry: Registry | None = None
    messages = prepare_messages(state)
    if results or state.get("rendered_contexts"):
        # emitKnowledgeReferencesEvent: the whole merge result, before the answer, citations on or off
        registry = Registry(citations_enabled=request.citations_enabled)
        sources = source_chunks(results)
        events.emit(context, events.references(turn, references_payload(sources)))
        messages = prepare_cited_messages(state, registry, sources)
    try:
        response = await stream_answer(client, messages, chat_options(request), turn, context, registry=registry)
    except ChatModelError as exc:
        return model_error_update(turn, context, exc)
    return {"chat_response": response, "messages": [assistant_message(turn, response, results)]}
