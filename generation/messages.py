"""The prompt of an answer: system prompt, earlier rounds, the current user message
(seed: prepareMessagesWithHistory, common.go).

The user message carries the turn's images (seed: ContextImages + the user's Images) to a model
that sees, and their descriptions to one that does not; both are added here, where every preset
builds its answer, so a chat-only turn (no into_chat_message) treats images the same way.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from ragline import prompts
from ragline.contracts.request import PipelineRequest
from ragline.contracts.state import HistoryTurn, PipelineState
from ragline.generation.vision import (
    Part,
    context_image_parts,
    context_image_refs,
    image_descriptions,
    supports_vision,
    user_image_parts,
)
from ragline.models.chat import Message
from ragline.services import Services


def language_of(request: PipelineRequest) -> str:
    return request.language or prompts.detect_language(request.query)


def fallback_template(request: PipelineRequest) -> prompts.PromptTemplate:
    """fallback.yaml's entry for the question's language."""
    chinese = prompts.detect_language(request.language or request.query).startswith("Chinese")
    return (prompts.find("fallback", "zh") if chinese else None) or prompts.get("fallback")


def fixed_response(request: PipelineRequest) -> str:
    """The fixed "not found" text: the request's own, or fallback.yaml's."""
    return request.fallback_response or fallback_template(request).text("response")


def placeholder_values(state: PipelineState) -> dict[str, Any]:
    request = state["request"]
    return {
        "query": state.get("rewrite_query") or request.query,
        "language": language_of(request),
        "current_time": prompts.current_time(),
        "current_date": prompts.current_date(),
        "contexts": state.get("rendered_contexts", ""),
    }


# the seed's appendRetrievedImageOutputRequirement (code, not a template file): when the search
# context holds Markdown images, the model may show them, and only them
RETRIEVED_IMAGES_REQUIREMENT = (
    "Some search results contain images in Markdown (![description](url)). When an image helps answer the question, show it "
    "in your answer with exactly the Markdown and URL of the search result; never write an image URL that is not in the search results."
)
MARKDOWN_IMAGE = re.compile(r"!\[[^\]\n]*\]\([^)\s]+[^)]*\)")


def system_prompt(state: PipelineState) -> str:
    """SystemPromptOverride (intent prompt) first, then the request's prompt, then system_prompt.yaml."""
    request = state["request"]
    template = state.get("system_prompt_override") or request.summary.prompt or prompts.get("system_prompt").text()
    rendered = prompts.render(template, **placeholder_values(state))
    if any(MARKDOWN_IMAGE.search(result.content) for result in state.get("merge_results", [])):
        rendered += "\n\n" + RETRIEVED_IMAGES_REQUIREMENT
    memory = state.get("memory_prompt")
    return f"{rendered}\n\n{memory}" if memory else rendered


def history_messages(history: list[HistoryTurn]) -> list[Message]:
    messages: list[Message] = []
    for turn in history:
        messages.append({"role": "user", "content": turn.query})
        messages.append({"role": "assistant", "content": turn.answer})
    return messages


def quoted_block(request: PipelineRequest) -> str:
    """The part of an earlier answer the question replies to, each line marked as a quote, as the
    model reads it after the question's contexts (prompts/quoted_context.yaml); "" when none."""
    if not request.quoted_context.strip():
        return ""
    lines = "\n".join(f"> {line}" for line in request.quoted_context.strip().splitlines())
    return prompts.render(prompts.get("quoted_context").text(), quoted=lines)


def prepare_messages(state: PipelineState) -> list[Message]:
    """System prompt, earlier rounds in order, then the current user message."""
    request = state["request"]
    user_content = state.get("user_content") or "\n\n".join(filter(None, [request.query, quoted_block(request)]))
    return [
        {"role": "system", "content": system_prompt(state)},
        *history_messages(state.get("history", [])),
        {"role": "user", "content": user_content},
    ]


def answers_with_vision(state: PipelineState, services: Services) -> bool:
    """Whether the model answering this turn reads images (the request's model, else the configured one)."""
    request = state["request"]
    return supports_vision(request.chat_model or services.settings.chat_model, services.settings, request)


async def image_parts(state: PipelineState, services: Services) -> list[Part]:
    """The retrieved images (labelled, at most CONTEXT_IMAGES_MAX), then the user's own images."""
    request = state["request"]
    refs = context_image_refs(state.get("merge_results", []))
    parts = await asyncio.to_thread(context_image_parts, refs, services.images.store) if refs else []
    if request.images:
        parts += await asyncio.to_thread(user_image_parts, request.images)
    return parts


def _with_parts(message: Message, parts: list[Part]) -> Message:
    return {**message, "content": [{"type": "text", "text": message["content"]}, *parts]}


async def answer_messages(state: PipelineState, services: Services | None) -> list[Message]:
    """`prepare_messages` plus the turn's images: as images for a vision model, as text otherwise.
    A host that gave no services gets the text messages."""
    messages = prepare_messages(state)
    request = state["request"]
    if services is None:
        return messages
    if answers_with_vision(state, services):
        parts = await image_parts(state, services)
        return [*messages[:-1], _with_parts(messages[-1], parts)] if parts else messages
    described = image_descriptions(request.images, state.get("image_description", ""))
    if not described:
        return messages
    last = messages[-1]
    return [*messages[:-1], {**last, "content": f"{last['content']}\n\n{described}"}]
