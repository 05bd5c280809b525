"""One answer from the model: streamed or not, cited or not (seed: chat_completion*.go, common.go).

`answer_turn` is the whole generation stage for both chat_completion and chat_completion_stream,
so every preset answers the same way: with retrieved contexts, the references event goes out
first and the model's ref tags are expanded through the answer's citation registry; answer
sentences without a ref get the passages that support them, marked as attributed
(`ragline.citations.attribution`), streamed or not alike. Streaming sends thinking and answer
deltas as they come; either way exactly one terminal answer event goes out, a truncated answer
is flagged on it, and a provider error becomes an error event.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from langchain_core.messages import AIMessage

from ragline import defaults
from ragline.citations import Registry, references_payload
from ragline.citations.attribution import Attributor, TextEmbedder
from ragline.citations.grounding import review
from ragline.citations.links import LinkGuard
from ragline.citations.plain import plain_text
from ragline.contracts import events, thread_messages
from ragline.contracts.context import RunContext
from ragline.contracts.request import PipelineRequest
from ragline.contracts.state import ChatResponse, ErrorKind, PipelineError, PipelineState, TurnIds
from ragline.generation.citing import answer_registry, cited_messages, source_chunks
from ragline.generation.message_stream import AnswerChunks
from ragline.generation.messages import answer_messages, fixed_response
from ragline.models.chat import (
    ChatClient,
    ChatModelError,
    ChatOptions,
    Message,
    StreamEnd,
)
from ragline.services import services_in

TRUNCATED_EMPTY_HINT = (
    "The answer reached the model's output limit before any text was produced. "
    "Try a narrower question, or increase max_completion_tokens (summary.max_tokens)."
)


def chat_options(request: PipelineRequest, *, local: bool = False) -> ChatOptions:
    """The request's sampling options. Without a temperature on the request, a remote model gets
    the seed's 0.3 and a local one answers greedily: at 0.3 the 0.5B model flips facts it read
    correctly (the README's pairing question came back "100 metres" at 0.3 and "3 minutes" at 0
    in every prompt layout tried), and greedy decoding scored ~0.015 higher token F1 on XQuAD.
    A local model's answer is also capped when the request sets no limit: greedy decoding can loop
    until the context is full, minutes of generation on two cores."""
    summary = request.summary
    temperature = summary.temperature
    if temperature is None:
        temperature = defaults.LOCAL_ANSWER_TEMPERATURE if local else defaults.ANSWER_TEMPERATURE
    return ChatOptions(
        temperature=temperature,
        top_p=summary.top_p,
        seed=summary.seed,
        max_tokens=summary.max_tokens or (defaults.LOCAL_ANSWER_MAX_TOKENS if local else None),
        thinking=summary.thinking,
    )


def is_truncation(finish_reason: str | None) -> bool:
    """Case-insensitive: providers spell the same reason "length", "LENGTH", "max_tokens"."""
    return (finish_reason or "").lower() in defaults.TRUNCATION_FINISH_REASONS


def assistant_message(turn: TurnIds, response: ChatResponse, references: list[Any] | None = None, *, plain: bool = False,
                      metadata: dict[str, Any] | None = None) -> AIMessage:
    """The answer as the conversation keeps it. `plain` (a turn asked in messages form, by a parent
    graph or Studio's chat): the text without citation tags, the citations as data beside it.
    `metadata`: what the run records on its answer (RunContext.answer_metadata: the assistant)."""
    content, citations = response.content, None
    if plain:
        content, cited = plain_text(content)
        citations = [c.as_dict() for c in cited]
    return thread_messages.answer(content, id=turn.assistant_message_id, request_id=turn.request_id,
                                  references=references or (), stopped=response.stopped, truncated=response.truncated,
                                  citations=citations, metadata=metadata)


def _finish(client: ChatClient, content: str, thinking: str, end: StreamEnd, turn: TurnIds, context: RunContext,
            chunks: AnswerChunks, *, stopped: bool, fallback: bool) -> ChatResponse:
    """The terminal events of a stream (one done answer, whatever the provider did) and the response."""
    truncated = is_truncation(end.finish_reason)
    if truncated and not content.strip():
        content = TRUNCATED_EMPTY_HINT
        events.emit(context, events.answer(turn, content))
        chunks.answer(content)
    if thinking:
        events.emit(context, events.thinking(turn, "", done=True))
    events.emit(context, events.answer(turn, "", done=True, truncated=truncated))
    return ChatResponse(content=content, thinking=thinking, finish_reason=end.finish_reason, truncated=truncated,
                        stopped=stopped, fallback=fallback, model=client.model, usage=end.usage)


async def complete_answer(client: ChatClient, messages: list[Message], options: ChatOptions, turn: TurnIds,
                          context: RunContext, *, registry: Registry | None = None,
                          attributor: Attributor | None = None, links: LinkGuard | None = None) -> ChatResponse:
    """One call; the whole answer goes out as one terminal event. Raises ChatModelError before any event."""
    result = await client.chat(messages, options)
    content = links.check(result.content) if links is not None else result.content
    content = registry.expand_text(content) if registry else content
    if attributor is not None:
        content = await attributor.attribute_text(content)
    thinking = registry.expand_text(result.thinking) if registry and result.thinking else result.thinking
    truncated = is_truncation(result.finish_reason)
    if truncated and not content.strip():
        content = TRUNCATED_EMPTY_HINT
    chunks = AnswerChunks(turn)
    if thinking:
        events.emit(context, events.thinking(turn, thinking, done=True))
        chunks.thinking(thinking)
    events.emit(context, events.answer(turn, content, done=True, truncated=truncated))
    chunks.answer(content)
    return ChatResponse(content=content, thinking=thinking, finish_reason=result.finish_reason, truncated=truncated,
                        model=client.model, usage=result.usage)


async def stream_answer(
    client: ChatClient,
    messages: list[Message],
    options: ChatOptions,
    turn: TurnIds,
    context: RunContext,
    *,
    fallback: bool = False,
    registry: Registry | None = None,
    attributor: Attributor | None = None,
    links: LinkGuard | None = None,
) -> ChatResponse:
    """Stream deltas as events. Raises ChatModelError after emitting nothing terminal."""
    parts: dict[str, list[str]] = {"answer": [], "thinking": []}
    decoders = {kind: registry.stream_decoder() if registry else None for kind in parts}
    link_stream = links.stream() if links is not None else None
    attribution = attributor.stream() if attributor is not None else None
    chunks = AnswerChunks(turn)

    def send(kind: str, text: str) -> None:
        if not text:
            return
        parts[kind].append(text)
        if kind == "thinking":
            events.emit(context, events.thinking(turn, text))
            chunks.thinking(text)
        else:
            events.emit(context, events.answer(turn, text))
            chunks.answer(text)

    end = StreamEnd(None)
    stopped = ended = False
    try:
        # stopped before the model was asked (the graph runs on until its host cancels it): no prefill for nothing
        stream = _no_items() if context.is_cancelled() else client.stream(messages, options)
        stopped = context.is_cancelled()
        async for item in stream:
            if context.is_cancelled():
                stopped = True
                break
            if isinstance(item, StreamEnd):
                end = item
                break
            decoder = decoders[item.kind]
            text = link_stream.feed(item.text) if item.kind == "answer" and link_stream is not None else item.text
            text = decoder.feed(text) if decoder else text
            if item.kind == "answer" and attribution is not None:
                text = await attribution.feed(text)
            send(item.kind, text)
        ended = True
    except asyncio.CancelledError:
        if context.host.cancel_event is not None:
            raise  # a host that stops runs itself (the service, the CLI) saves what was shown, or hands the run over
        # A run cancelled by a host that cannot save it (langgraph dev's cancel, a parent's timeout): the
        # answer so far is the turn's answer, marked stopped, as a stop in the service would leave it.
        asyncio.current_task().uncancel()  # type: ignore[union-attr]
        stopped = True
    finally:  # end, error or cancel: text held back by a decoder or the attribution is never lost
        for kind, decoder in decoders.items():
            held = link_stream.flush() if kind == "answer" and link_stream is not None else ""
            tail = (decoder.feed(held) + decoder.flush()) if decoder is not None else held
            if kind == "answer" and attribution is not None:
                # the last sentence is attributed at a real end; an error or a cancel does not wait for it
                tail = await attribution.finish(tail) if ended else attribution.abandon(tail)
            send(kind, tail)
    return _finish(client, "".join(parts["answer"]), "".join(parts["thinking"]), end, turn, context, chunks,
                   stopped=stopped, fallback=fallback)


async def _no_items() -> AsyncIterator[Any]:
    return
    yield


def _user_words(messages: list[Message]) -> list[str]:
    """What the user wrote in this conversation: a link they gave may come back in the answer."""
    return [str(m.get("content") or "") for m in messages if isinstance(m, dict) and m.get("role") == "user"]


def _embedder(context: RunContext) -> TextEmbedder | None:
    """The run's embedder, for attribution; a host that gave no services gets no attribution."""
    services = services_in(context)
    return services.embedder if services is not None else None


def grounded(response: ChatResponse, attributor: Attributor, request: PipelineRequest, turn: TurnIds,
             context: RunContext) -> ChatResponse:
    """The answer once every sentence was judged (citations/grounding.py): a sentence the sources
    contradict gives way to their words, and an answer with nothing grounded but a made-up number
    to the fallback text. A changed answer goes out again whole, as a `replace`."""
    verdict = review(response.content, attributor.judgements, attributor.tag_for)
    if verdict.ungrounded:
        response = replace(response, content=fixed_response(request), fallback=True)
    elif verdict.content != response.content:
        response = replace(response, content=verdict.content)
    else:
        return response
    event = events.answer(turn, response.content)
    event.data = {"replace": True}
    events.emit(context, event)
    return response


def model_error_update(turn: TurnIds, context: RunContext, exc: ChatModelError) -> dict[str, Any]:
    """ErrModelCall: tell the client (terminal error event) and stop the pipeline."""
    events.emit(context, events.error(turn, str(exc), code=ErrorKind.MODEL_CALL.value))
    return {"error": PipelineError(ErrorKind.MODEL_CALL, str(exc))}


async def answer_turn(state: PipelineState, client: ChatClient, context: RunContext, *, stream: bool) -> dict[str, Any]:
    """The generation stage: references first when there are contexts, the cited answer, the stored message."""
    request, turn = state["request"], state["turn"]
    results = list(state.get("merge_results", []))
    messages = await answer_messages(state, services_in(context))
    registry: Registry | None = None
    attributor: Attributor | None = None
    links = LinkGuard.images_only()  # no sources: still no foreign image for a client to load
    if results or state.get("rendered_contexts"):
        # emitKnowledgeReferencesEvent: the whole merge result, before the answer, citations on or off
        sources = source_chunks(results)
        events.emit(context, events.references(turn, references_payload(sources)))
        registry = answer_registry(request, sources, compact_protocol=client.is_local)  # a 0.5B model reads the short rules better
        messages = cited_messages(registry, messages)
        attributor = Attributor.for_answer(registry, sources, _embedder(context), state.get("rewrite_query") or request.query)
        # the sources as the model read them (citing.py's _passage left out the sentences that speak to
        # the assistant or the reader): a link or number only such a sentence holds cannot come back
        links = LinkGuard([*(s.content for s in sources), *(s.url for s in sources), *_user_words(messages)])
    try:
        if stream:
            response = await stream_answer(client, messages, chat_options(request, local=client.is_local), turn, context, registry=registry,
                                           attributor=attributor, links=links)
        else:
            response = await complete_answer(client, messages, chat_options(request, local=client.is_local), turn, context, registry=registry,
                                             attributor=attributor, links=links)
    except ChatModelError as exc:
        return model_error_update(turn, context, exc)
    if attributor is not None and not response.stopped:
        response = grounded(response, attributor, request, turn, context)
    message = assistant_message(turn, response, results, plain=bool(state.get("plain_reply")), metadata=context.answer_metadata())
    return {"chat_response": response, "messages": [message]}
