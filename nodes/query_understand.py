"""query_understand: rewrite the question and classify its intent (seed: query_understand.go).

One model call with rewrite.yaml (or the request's rewrite prompts) returns JSON with the
self-contained question, the intent and, for images, their description. A separate small model
may do it, falling back to the chat model when it fails. A first-turn text question has nothing
to rewrite, and neither has a follow-up that stands on its own (generation/standalone.py): their
intent comes from embedded exemplars (models/intents.py), without a call. The rewrite reads
the conversation cut to a token budget (generation/rewrite.py); its fixed system prompt is the
prompt cache's prefix on the local model. For intents that need no retrieval the
system prompt is overridden from intent_prompts.yaml (applyIntentPromptOverride).

Images go to the chat model when it sees (litellm's model map, `vision_models`, or the request
says so), else to the vision model (the request's, else the configured `vlm_model`). Their
description is written back to the user message's first image as its caption
(UpdateMessageImages), so later rounds replay it in their history.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from langchain_core.messages import AnyMessage
from langgraph.runtime import Runtime

from ragline import defaults, prompts
from ragline.contracts import thread_messages
from ragline.contracts.context import RunContext
from ragline.contracts.request import PipelineRequest
from ragline.contracts.state import PipelineState, QueryIntent, needs_retrieval
from ragline.generation.messages import language_of
from ragline.generation.rewrite import NO_CONVERSATION, conversation_within_budget, estimated_tokens
from ragline.generation.standalone import stands_on_its_own
from ragline.generation.understanding import Understanding, parse_understanding
from ragline.generation.vision import supports_vision
from ragline.models.chat import ChatModelError, ChatOptions, Message
from ragline.models.embeddings import EmbeddingError
from ragline.services import Services, services_of
from ragline.settings import Settings

# Structured output where the provider supports it: small local models follow a schema reliably
# (llama.cpp constrains decoding to it) where a prose instruction alone loops or drifts.
UNDERSTANDING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "rewrite_query": {"type": "string"},
        "intent": {"type": "string", "enum": [intent.value for intent in QueryIntent]},
        "image_description": {"type": "string"},
    },
    "required": ["rewrite_query", "intent"],
}


def understanding_format(images: bool) -> dict[str, Any]:
    """The reply's schema; without images it has no image_description, so a constrained model
    never decodes the empty field the prompt's example shows (every output token is decoded
    before the search can start)."""
    properties = {name: rule for name, rule in UNDERSTANDING_SCHEMA["properties"].items() if images or name != "image_description"}
    return {"type": "json_schema", "json_schema": {"name": "query_understanding", "schema": {**UNDERSTANDING_SCHEMA, "properties": properties}}}


UNDERSTANDING_FORMAT = understanding_format(images=True)


def vision_model(request: PipelineRequest, settings: Settings) -> str | None:
    """Text+image or image-only input: the chat model if it sees, else the VLM (None: no model sees)."""
    chat = request.chat_model or settings.chat_model
    if supports_vision(chat, settings, request):
        return chat
    return request.vlm_model or settings.vlm_model


def candidate_models(request: PipelineRequest, settings: Settings) -> list[str | None]:
    """Models to try in order: the small understanding model first, then the chat model."""
    if request.images and (vision := vision_model(request, settings)):
        return [vision]
    small = request.query_understand_model or settings.query_understand_model
    return [small, request.chat_model] if small else [request.chat_model]


def build_messages(state: PipelineState, settings: Settings, conversation: str = NO_CONVERSATION) -> list[Message]:
    """The rewrite prompt: system (fixed, so the prompt cache keeps it) and user (conversation + question)."""
    request = state["request"]
    template = prompts.get("rewrite")
    values = {
        "conversation": conversation,
        "query": request.query or "(image only)",
        "language": language_of(request),
        "current_time": prompts.current_time(),
    }
    system = prompts.render(request.rewrite_prompt_system or template.text("system"), **values)
    user_text = prompts.render(request.rewrite_prompt_user or template.text("user"), **values)
    user: Any = user_text
    if request.images and vision_model(request, settings):
        user = [{"type": "text", "text": user_text}] + [
            {"type": "image_url", "image_url": {"url": image.url}} for image in request.images
        ]
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def needs_rewrite_call(state: PipelineState, services: Services) -> bool:
    """Images, custom rewrite prompts and follow-ups that refer back need the model; a first-turn
    text question and a follow-up that stands on its own do not."""
    request = state["request"]
    settings = services.settings
    if settings.first_turn_intent == "model" or request.images or request.rewrite_prompt_system or request.rewrite_prompt_user:
        return True
    if not state.get("history"):
        return False
    return settings.followup_rewrite == "always" or not stands_on_its_own(request.query)


async def conversation(state: PipelineState, services: Services, model: str | None) -> str:
    """The history the rewrite reads, within its token budget: counted by the local model's own
    tokenizer, estimated for a remote one (or when the local model cannot load: the call then fails alike)."""
    history = state.get("history", [])
    client = services.chat(model)
    if client.is_local:
        try:
            return await conversation_within_budget(history, client.count_tokens)
        except RuntimeError:  # LocalModelError: no local extra, a broken file
            pass
    return await conversation_within_budget(history, estimated_tokens)


async def understand(state: PipelineState, services: Services) -> Understanding:
    request = state["request"]
    images = bool(request.images)
    structured = ChatOptions(
        temperature=0.0,
        max_tokens=defaults.QUERY_UNDERSTAND_IMAGE_MAX_TOKENS if images else defaults.QUERY_UNDERSTAND_MAX_TOKENS,
        response_format=understanding_format(images),
    )
    plain = replace(structured, response_format=None)  # for servers that reject structured output
    models = candidate_models(request, services.settings)
    messages = build_messages(state, services.settings, await conversation(state, services, models[0]))
    last_error: ChatModelError | None = None
    for model in models:
        client = services.chat(model)
        for options in (structured, plain):
            try:
                result = await client.chat(messages, options)
            except ChatModelError as exc:
                last_error = exc
                if exc.transient:  # down, not refusing structured output: the plain variant would fail alike
                    break
                continue
            return parse_understanding(result.content, request.query)
    assert last_error is not None
    raise last_error


def intent_prompt_override(intent: str, request: PipelineRequest) -> str | None:
    """The system prompt for an intent that needs no retrieval, or None."""
    if needs_retrieval(intent, request):
        return None
    if request.system_prompt_override:
        return request.system_prompt_override
    if intent in request.intent_prompts:
        return request.intent_prompts[intent]
    template = prompts.find("intent_prompts", intent)
    return template.text() if template else None


def captioned_user_message(state: PipelineState, description: str) -> list[AnyMessage]:
    """UpdateMessageImages: the user message again (same id, so it replaces the stored one) with
    the description as its first image's caption; nothing when there is nothing to write."""
    turn = state.get("turn")
    original = next((m for m in state.get("messages", []) if turn and m.id == turn.user_message_id), None)
    images = thread_messages.images_of(original) if original is not None else []
    if original is None or not images or not description:
        return []
    images[0] = {**images[0], "caption": description}
    return [thread_messages.with_fields(original, **{thread_messages.IMAGES: images})]


async def query_understand(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Rewrite the question with the conversation and classify its intent.

    With rewriting off, or when every model fails, the original question is kept and the intent
    stays empty (= search), so understanding never blocks an answer.
    """
    request = state["request"]
    if not request.rewrite_enabled:
        return {"rewrite_query": request.query, "intent": ""}
    services = services_of(runtime)
    result: Understanding | None = None
    if not needs_rewrite_call(state, services):
        try:
            guess = await services.intents.classify(request.query, web_search=request.web_search_enabled)
            result = Understanding(request.query, guess.intent)
        except EmbeddingError:  # the embedder is down: the model can still classify
            result = None
    if result is None:
        try:
            result = await understand(state, services)
        except ChatModelError:
            result = Understanding(request.query, "", "", parsed=False)
    return {
        "rewrite_query": result.rewrite_query,
        "intent": result.intent,
        "image_description": result.image_description,
        "system_prompt_override": intent_prompt_override(result.intent, request),
        "messages": captioned_user_message(state, result.image_description),
    }
