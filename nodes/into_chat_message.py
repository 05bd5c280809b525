"""into_chat_message: assemble the user message from the question and the contexts
(seed: PluginIntoChatMessage, into_chat_message.go).

The question is checked for prompt-injection phrasing (flagged, never dropped). The contexts are
rendered once, through the answer's citation registry: each under its alias, FAQ answers first
and marked exact when FAQ priority is on. The context template is rendered even with no
contexts, so the current time still reaches the model. The rendered message is stored on the
user message for audit.
"""

from __future__ import annotations

import re
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.runtime import Runtime

from ragline import prompts
from ragline.generation.citing import render_contexts, source_chunks
from ragline.generation.messages import placeholder_values
from ragline.graph.context import RunContext
from ragline.graph.state import PipelineState

_INJECTION = [
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"\bignore\s+(all\s+|any\s+|the\s+)?(previous|prior|above|earlier)\s+(instructions|prompts|rules)",
        r"\bdisregard\s+(all\s+|any\s+|the\s+)?(previous|prior|above|system)\b",
        r"\b(reveal|print|show|repeat)\s+(your|the)\s+(system\s+prompt|instructions)",
        r"\byou\s+are\s+now\s+(?:a|an|in)\b",
        r"忽略(之前|以上|上面|前面)的?(所有)?(指令|指示|提示)",
        r"(输出|显示|告诉我)(你的)?系统提示",
    )
]


def injection_flags(text: str) -> list[str]:
    """ValidateInput: the suspicious phrases found (the question is still answered)."""
    return [match.group(0) for pattern in _INJECTION if (match := pattern.search(text or ""))]


def _audited_user_message(state: PipelineState, rendered: str, flags: list[str]) -> list[HumanMessage]:
    turn = state["turn"]
    original = next((m for m in state.get("messages", []) if m.id == turn.user_message_id), None)
    if original is None:
        return []
    extra = {**original.additional_kwargs, "rendered_content": rendered}
    if flags:
        extra["injection_flags"] = flags
    return [HumanMessage(content=original.content, id=original.id, additional_kwargs=extra)]  # same id: replaced


async def into_chat_message(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Render the context template with the merged results into `user_content`."""
    request = state["request"]
    contexts = render_contexts(request, source_chunks(list(state.get("merge_results", []))))
    template = request.summary.context_template or prompts.get("context_template").text()
    values = {**placeholder_values(state), "query": request.query, "contexts": contexts or "(no retrieved contexts)"}
    user_content = prompts.render(template, **values)
    flags = injection_flags(request.query)
    return {
        "user_content": user_content,
        "rendered_contexts": contexts,
        "messages": _audited_user_message(state, user_content, flags),
    }
