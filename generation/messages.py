"""The prompt of an answer: system prompt, earlier rounds, the current user message
(seed: prepareMessagesWithHistory, common.go)."""

from __future__ import annotations

from typing import Any

from ragline import prompts
from ragline.graph.request import PipelineRequest
from ragline.graph.state import HistoryTurn, PipelineState
from ragline.models.chat import Message


def language_of(request: PipelineRequest) -> str:
    return request.language or prompts.detect_language(request.query)


def placeholder_values(state: PipelineState) -> dict[str, Any]:
    request = state["request"]
    return {
        "query": state.get("rewrite_query") or request.query,
        "language": language_of(request),
        "current_time": prompts.current_time(),
        "current_date": prompts.current_date(),
        "contexts": state.get("rendered_contexts", ""),
    }


def system_prompt(state: PipelineState) -> str:
    """SystemPromptOverride (intent prompt) first, then the request's prompt, then system_prompt.yaml."""
    request = state["request"]
    template = state.get("system_prompt_override") or request.summary.prompt or prompts.get("system_prompt").text()
    rendered = prompts.render(template, **placeholder_values(state))
    memory = state.get("memory_prompt")
    return f"{rendered}\n\n{memory}" if memory else rendered


def history_messages(history: list[HistoryTurn]) -> list[Message]:
    messages: list[Message] = []
    for turn in history:
        messages.append({"role": "user", "content": turn.query})
        messages.append({"role": "assistant", "content": turn.answer})
    return messages


def prepare_messages(state: PipelineState) -> list[Message]:
    """System prompt, earlier rounds in order, then the current user message."""
    request = state["request"]
    user_content = state.get("user_content") or request.query
    return [
        {"role": "system", "content": system_prompt(state)},
        *history_messages(state.get("history", [])),
        {"role": "user", "content": user_content},
    ]
