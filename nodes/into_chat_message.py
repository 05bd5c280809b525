"""into_chat_message: assemble the user message from the question and the contexts
(seed: PluginIntoChatMessage, into_chat_message.go).

The seed's ValidateInput gate runs earlier, when the turn begins (generation/input_check.py). The contexts are
rendered once, through the answer's citation registry: each under its alias, FAQ answers first
and marked exact when FAQ priority is on; for a local model, as plain passages (see
`ragline.citations.render.render_plain_results`). The context template is rendered even with no
contexts, so the current time still reaches the model. A question that replies to a quoted part
of an earlier answer gets it after the template (prompts/quoted_context.yaml). The rendered
message is stored on the user message for audit.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AnyMessage
from langgraph.runtime import Runtime

from ragline import prompts
from ragline.contracts import thread_messages
from ragline.contracts.context import RunContext
from ragline.contracts.state import PipelineState
from ragline.generation.citing import render_contexts, source_chunks
from ragline.generation.messages import placeholder_values, quoted_block
from ragline.services import services_of


def _audited_user_message(state: PipelineState, rendered: str) -> list[AnyMessage]:
    turn = state["turn"]
    original = next((m for m in state.get("messages", []) if m.id == turn.user_message_id), None)
    if original is None:
        return []
    return [thread_messages.with_fields(original, **{thread_messages.RENDERED_CONTENT: rendered})]


async def into_chat_message(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Render the context template with the merged results into `user_content`."""
    request = state["request"]
    plain = services_of(runtime).chat(request.chat_model).is_local  # a small local model reads plain passages best
    contexts = render_contexts(request, source_chunks(list(state.get("merge_results", []))), plain=plain)
    template = request.summary.context_template or prompts.get("context_template").text()
    values = {**placeholder_values(state), "query": request.query, "contexts": contexts or "(no retrieved contexts)"}
    user_content = prompts.render(template, **values)
    if quote := quoted_block(request):
        user_content += "\n\n" + quote
    return {
        "user_content": user_content,
        "rendered_contexts": contexts,
        "messages": _audited_user_message(state, user_content),
    }
