"""What chat_completion, chat_completion_stream and fallback share (seed: common.go).

prepareChatModel -> `chat_client_for`, `chat_options`; prepareMessagesWithHistory ->
`prepare_messages`; the streaming loop with its single terminal event and truncation rules ->
`stream_answer`.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, convert_to_messages, convert_to_openai_messages

from ragline import defaults, prompts
from ragline.citations import Registry, SourceChunk
from ragline.graph import events
from ragline.graph.context import RunContext
from ragline.graph.request import PipelineRequest
from ragline.graph.state import ChatResponse, ErrorKind, HistoryTurn, PipelineError, PipelineState, TurnIds
from ragline.models.chat import ChatClient, ChatModelError, ChatOptions, Message, StreamEnd

TRUNCATED_EMPTY_HINT = (
    "The answer reached the model's output limit before any text was produced. "
    "Try a narrower question, or increase max_completion_tokens (summary.max_tokens)."
)


def chat_client_for(request: PipelineRequest) -> ChatClient:
    return ChatClient.for_model(request.chat_model)


def chat_options(request: PipelineRequest) -> ChatOptions:
    summary = request.summary
    return ChatOptions(
        temperature=summary.temperature,
        top_p=summary.top_p,
        seed=summary.seed,
        max_tokens=summary.max_tokens,
        thinking=summary.thinking,
    )


def language_of(request: PipelineRequest) -> str:
    return request.language or prompts.detect_language(request.query)


def placeholder_values(state: PipelineState) -> dict[str, Any]:
    request = state["request"]
    return {
        "query": state.get("rewrite_query") or request.query,
        "language": language_of(request),
        "current_time": prompts.current_time(),
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


def source_chunks(results: list[Any]) -> list[SourceChunk]:
    """Merged search results as the citations package takes them."""
    chunks = []
    for result in results:
        data = result.model_dump(mode="json") if hasattr(result, "model_dump") else dict(result)
        metadata = data.get("metadata") or {}
        chunks.append(
            SourceChunk(
                chunk_id=data["id"],
                content=data.get("content", ""),
                knowledge_id=data.get("knowledge_id", ""),
                knowledge_base_id=data.get("knowledge_base_id", ""),
                title=data.get("knowledge_title") or metadata.get("title", ""),
                score=float(data.get("score", 0.0)),
                base_score=metadata.get("composite_score"),
                chunk_index=int(data.get("chunk_index", 0)),
                chunk_type=str(data.get("chunk_type", "text")),
                match_type=str(metadata.get("match_type") or data.get("match_type", "")),
                source="web_search" if metadata.get("source") == "web_search" else "knowledge_base",
                url=str(metadata.get("url", "")),
                metadata=metadata,
            )
        )
    return chunks


def prepare_cited_messages(state: PipelineState, registry: Registry, sources: list[SourceChunk]) -> list[Message]:
    """prepareMessagesWithModelContext: contexts as cN aliases, the citation protocol, encoded handles."""
    request = state["request"]
    plain = prepare_messages(state)
    lc_messages = convert_to_messages(plain)
    prepared = registry.prepare_messages(
        lc_messages,
        results=sources,
        rendered_contexts=state.get("rendered_contexts", ""),
        faq_priority=request.faq_priority_enabled,
        faq_direct_answer_threshold=request.faq_direct_answer_threshold,
    )
    return convert_to_openai_messages(prepared)


def is_truncation(finish_reason: str | None) -> bool:
    return (finish_reason or "").lower() in defaults.TRUNCATION_FINISH_REASONS


def assistant_message(turn: TurnIds, response: ChatResponse, references: list[Any] | None = None) -> AIMessage:
    return AIMessage(
        content=response.content,
        id=turn.assistant_message_id,
        additional_kwargs={
            "request_id": turn.request_id,
            "references": [r.model_dump(mode="json") if hasattr(r, "model_dump") else r for r in references or []],
            "truncated": response.truncated,
            "stopped": response.stopped,
        },
    )


async def stream_answer(
    client: ChatClient,
    messages: list[Message],
    options: ChatOptions,
    turn: TurnIds,
    context: RunContext,
    *,
    fallback: bool = False,
    registry: Registry | None = None,
) -> ChatResponse:
    """Stream deltas as events; exactly one terminal answer event, whatever the provider does.

    Raises ChatModelError after emitting nothing terminal, so the caller decides the error path.
    """
    answer_parts: list[str] = []
    thinking_parts: list[str] = []
    decoders = {kind: registry.stream_decoder() if registry else None for kind in ("answer", "thinking")}

    def send(kind: str, text: str) -> None:
        decoder = decoders[kind]
        text = decoder.feed(text) if decoder else text
        if not text:
            return
        (thinking_parts if kind == "thinking" else answer_parts).append(text)
        events.emit(context, events.thinking(turn, text) if kind == "thinking" else events.answer(turn, text))

    end = StreamEnd(None)
    stopped = False
    try:
        async for item in client.stream(messages, options):
            if context.is_cancelled():
                stopped = True
                break
            if isinstance(item, StreamEnd):
                end = item
                break
            send(item.kind, item.text)
    finally:  # end, error or cancel: text held back by a decoder is never lost
        for kind, decoder in decoders.items():
            if decoder is not None and (tail := decoder.flush()):
                (thinking_parts if kind == "thinking" else answer_parts).append(tail)
                events.emit(context, events.thinking(turn, tail) if kind == "thinking" else events.answer(turn, tail))
    truncated = is_truncation(end.finish_reason)
    content = "".join(answer_parts)
    if truncated and not content.strip():
        content = TRUNCATED_EMPTY_HINT
        events.emit(context, events.answer(turn, content))
    if thinking_parts:
        events.emit(context, events.thinking(turn, "", done=True))
    events.emit(context, events.answer(turn, "", done=True, truncated=truncated))
    return ChatResponse(
        content=content,
        thinking="".join(thinking_parts),
        finish_reason=end.finish_reason,
        truncated=truncated,
        stopped=stopped,
        fallback=fallback,
        model=client.model,
        usage=end.usage,
    )


def model_error_update(turn: TurnIds, context: RunContext, exc: ChatModelError) -> dict[str, Any]:
    """ErrModelCall: tell the client (terminal error event) and stop the pipeline."""
    events.emit(context, events.error(turn, str(exc), code=ErrorKind.MODEL_CALL.value))
    return {"error": PipelineError(ErrorKind.MODEL_CALL, str(exc))}
