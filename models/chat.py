"""Chat models through litellm: one call, or a stream that keeps reasoning apart from the answer.

Any litellm provider works (OpenAI, Ollama, DeepSeek, an OpenAI-compatible base URL); model
strings starting with `ragline/` go to the local llama.cpp model, and `openai/<model>` with an
api_base (a self-hosted OpenAI-compatible server) is read directly by models/openai_stream.py,
which costs a small fraction of litellm's CPU per chunk. Reasoning arrives either as the
provider's `reasoning_content` or inline between <think> tags; both come out as THINKING deltas.
A remote call has a timeout (also the longest silence inside a stream) and is retried after
transient failures (models/retry.py), a stream only until its first delta went out.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from ragline import defaults
from ragline.models import local_engine
from ragline.models.local_engine import PROVIDER
from ragline.models.openai_stream import OpenAIStreamClient, serves_directly
from ragline.models.retry import RetryPolicy, count_retry, is_transient, litellm_module, wait_before_retry, with_retries
from ragline.models.think import Part as ChatDelta
from ragline.models.think import ThinkSplitter

Message = dict[str, Any]


class ChatModelError(RuntimeError):
    """The chat provider failed (connection, auth, bad request, timeout).

    `transient`: it failed for a reason that a later call may not meet (a 429, a 5xx, a dropped
    connection; retries already spent); False for a refused request, a timeout or a bad reply.
    """

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


@dataclass(frozen=True)
class ChatOptions:
    """The seed's ChatOptions, built from the request's SummaryConfig."""

    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    thinking: bool | None = None
    response_format: dict[str, Any] | None = None

    def litellm_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            key: value
            for key, value in (
                ("temperature", self.temperature),
                ("top_p", self.top_p),
                ("seed", self.seed),
                ("max_tokens", self.max_tokens),
                ("response_format", self.response_format),
            )
            if value is not None
        }
        if self.thinking is not None:
            kwargs["reasoning_effort"] = "medium" if self.thinking else "none"
        return kwargs


@dataclass(frozen=True)
class StreamEnd:
    """Last item of a stream: why it ended and what it cost."""

    finish_reason: str | None
    usage: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ChatResult:
    content: str
    thinking: str = ""
    finish_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)


def _usage_dict(usage: Any) -> dict[str, int]:
    if usage is None:
        return {}
    raw = usage if isinstance(usage, dict) else getattr(usage, "model_dump", lambda: {})()
    return {k: int(v) for k, v in raw.items() if k.endswith("_tokens") and isinstance(v, int)}


class ChatClient:
    """One chat model; construct once, call many times."""

    def __init__(self, model: str, api_base: str | None = None, api_key: str | None = None, timeout: float = defaults.CHAT_TIMEOUT_S,
                 retry: RetryPolicy = RetryPolicy(), direct: bool | None = None) -> None:
        """`direct`: read the provider with models/openai_stream.py (True), through litellm (False),
        or whichever fits the model (None: direct for an OpenAI-compatible server)."""
        self.model = model
        self.api_base = api_base
        self.api_key = api_key
        self.timeout = timeout
        self.retry = retry
        use_direct = serves_directly(model, api_base) if direct is None else direct
        self._direct = OpenAIStreamClient(api_base or "", api_key, timeout) if use_direct and api_base else None

    def _kwargs(self, messages: list[Message], options: ChatOptions) -> dict[str, Any]:
        return {
            "model": self.model,
            "messages": messages,
            "api_base": self.api_base,
            "api_key": self.api_key,
            "timeout": self.timeout,  # httpx's: to connect, and between two reads (so also a stalled stream)
            "max_retries": 0,  # the retry policy retries, not the SDK (models/retry.py)
            "drop_params": True,  # a provider without seed/top_p support ignores them instead of failing
            **options.litellm_kwargs(),
        }

    def _direct_body(self, messages: list[Message], options: ChatOptions) -> dict[str, Any]:
        """The request as litellm sends it to an OpenAI-compatible server: options passed as they are."""
        return {"model": self.model.partition("/")[2], "messages": messages, **options.litellm_kwargs()}

    @property
    def is_local(self) -> bool:
        return self.model.startswith(f"{PROVIDER}/")

    async def count_tokens(self, texts: list[str]) -> list[int]:
        """Tokens of each text as this model reads them: exact for the local model, litellm's count otherwise."""
        if self.is_local:
            return await asyncio.to_thread(local_engine.chat_engine(self.model).count_tokens, texts)
        litellm = await litellm_module()
        return [litellm.token_counter(model=self.model, text=text) for text in texts]

    async def _raw_chat(self, messages: list[Message], options: ChatOptions) -> tuple[str, str, str | None, Any]:
        """(content, provider reasoning, finish reason, usage) of one call."""
        if self.is_local:  # straight to llama.cpp: no litellm import on the embedded default's path
            engine = local_engine.chat_engine(self.model)
            result = await local_engine.complete(engine, messages, local_engine.completion_kwargs(options.litellm_kwargs()))
            choice = result["choices"][0]
            return choice["message"].get("content") or "", "", choice.get("finish_reason"), result.get("usage")
        if self._direct is not None:
            reply = await self._direct.complete(self._direct_body(messages, options))
            choice = reply["choices"][0]
            said = choice.get("message") or {}
            reasoning = said.get("reasoning_content") or said.get("reasoning") or ""
            return said.get("content") or "", reasoning, choice.get("finish_reason"), reply.get("usage")
        litellm = await litellm_module()
        response = await litellm.acompletion(**self._kwargs(messages, options))
        choice = response.choices[0]
        message = choice.message
        return message.content or "", getattr(message, "reasoning_content", None) or "", choice.finish_reason, getattr(response, "usage", None)

    async def chat(self, messages: list[Message], options: ChatOptions = ChatOptions()) -> ChatResult:
        try:
            if self.is_local:
                content, reasoning, finish_reason, usage = await self._raw_chat(messages, options)
            else:
                content, reasoning, finish_reason, usage = await with_retries(lambda: self._raw_chat(messages, options), self.retry,
                                                                              f"chat model {self.model}")
        except Exception as exc:
            raise ChatModelError(f"chat model {self.model} failed: {exc}", transient=is_transient(exc)) from exc
        splitter = ThinkSplitter()
        parts = [*splitter.feed(content), *splitter.flush()]
        return ChatResult(
            content="".join(p.text for p in parts if p.kind == "answer"),
            thinking=reasoning + "".join(p.text for p in parts if p.kind == "thinking"),
            finish_reason=finish_reason,
            usage=_usage_dict(usage),
        )

    async def _local_chunks(self, messages: list[Message], options: ChatOptions) -> AsyncIterator[tuple[str, str, str | None, Any]]:
        engine = local_engine.chat_engine(self.model)
        async for part in local_engine.stream_parts(engine, messages, local_engine.completion_kwargs(options.litellm_kwargs())):
            choice = part["choices"][0]
            yield "", choice.get("delta", {}).get("content") or "", choice.get("finish_reason"), None

    async def _remote_chunks(self, messages: list[Message], options: ChatOptions) -> AsyncIterator[tuple[str, str, str | None, Any]]:
        if self._direct is not None:
            chunks = self._direct.stream(self._direct_body(messages, options))
            try:
                async for chunk in chunks:
                    yield chunk
            finally:
                await chunks.aclose()  # type: ignore[attr-defined]  # closes the provider's connection now
            return
        litellm = await litellm_module()
        response = await litellm.acompletion(stream=True, stream_options={"include_usage": True}, **self._kwargs(messages, options))
        try:
            async for chunk in response:
                if not chunk.choices:
                    yield "", "", None, getattr(chunk, "usage", None)
                    continue
                choice = chunk.choices[0]
                delta = choice.delta
                yield (getattr(delta, "reasoning_content", None) or "", getattr(delta, "content", None) or "",
                       choice.finish_reason, getattr(chunk, "usage", None))
        finally:
            if hasattr(response, "aclose"):
                await response.aclose()

    async def stream(self, messages: list[Message], options: ChatOptions = ChatOptions()) -> AsyncIterator[ChatDelta | StreamEnd]:
        """Deltas as they arrive, then exactly one StreamEnd, however often the provider says 'done'.

        A remote stream that fails before its first delta is opened again as the retry policy
        says; once a delta went out it is never repeated (the client has shown it): the error ends it.
        """
        attempt = 0
        while True:
            progress = _StreamProgress()
            items = self._attempt(messages, options, progress)
            try:
                async for item in items:
                    if attempt and not progress.counted:  # a retry recovered once something went out
                        progress.counted = True
                        count_retry("chat", "recovered")
                    yield item
                return
            except Exception as exc:
                delay = None if progress.yielded or self.is_local else self.retry.delay_for(exc, attempt)
                if attempt and not progress.counted:
                    count_retry("chat", "gave_up" if delay is None else "retried_again")
                if delay is None:
                    where = " mid-stream" if progress.started else ""
                    raise ChatModelError(f"chat model {self.model} failed{where}: {exc}",
                                         transient=is_transient(exc) and not progress.yielded) from exc
                failure = exc
            finally:
                await items.aclose()  # type: ignore[attr-defined]  # a stopped answer frees the provider's stream now
            await wait_before_retry(f"chat model {self.model} (stream)", failure, attempt, delay)
            attempt += 1

    async def _attempt(self, messages: list[Message], options: ChatOptions, progress: _StreamProgress) -> AsyncIterator[ChatDelta | StreamEnd]:
        """One try at the stream; `progress` tells the caller whether anything went out."""
        chunks = self._local_chunks(messages, options) if self.is_local else self._remote_chunks(messages, options)
        splitter = ThinkSplitter()
        finish_reason: str | None = None
        usage: dict[str, int] = {}
        received = False
        try:
            async for reasoning, content, chunk_finish, chunk_usage in chunks:
                progress.started = True
                usage = _usage_dict(chunk_usage) or usage
                received = received or bool(reasoning or content)
                if reasoning:
                    progress.yielded = True
                    yield ChatDelta("thinking", reasoning)
                for part in splitter.feed(content):
                    progress.yielded = True
                    yield part
                finish_reason = finish_reason or chunk_finish  # the first end signal counts
        finally:
            await chunks.aclose()  # type: ignore[attr-defined]  # a stopped answer frees the provider's stream now
        if not self.is_local and not received and not usage and finish_reason is None:
            # no text, no usage, no end: a 200 that carried no stream data at all (a malformed reply), not an answer
            # (an end without text is an answer: a truncation before the first token)
            raise _EmptyStream(f"chat model {self.model} answered with no stream data")
        for part in splitter.flush():
            yield part
        yield StreamEnd(finish_reason, usage)


@dataclass
class _StreamProgress:
    started: bool = False  # the provider sent a chunk
    yielded: bool = False  # a delta went out to the caller: from here on, never retry
    counted: bool = False  # this attempt, a retry, was counted as recovered


class _EmptyStream(ValueError):
    """A 200 without stream data: malformed, so not retried (a ValueError is never transient)."""
