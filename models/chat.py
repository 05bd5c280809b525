"""Chat models through litellm: one call, or a stream that keeps reasoning apart from the answer.

Any litellm provider works (OpenAI, Ollama, DeepSeek, an OpenAI-compatible base URL); model
strings starting with `ragline/` go to the local llama.cpp model, and `openai/<model>` with an
api_base (a self-hosted OpenAI-compatible server) is read directly by models/openai_stream.py,
which costs a small fraction of litellm's CPU per chunk. Reasoning arrives either as the
provider's `reasoning_content` or inline between <think> tags; both come out as THINKING deltas.
A remote call has a timeout (also the longest silence inside a stream) and is retried after
transient failures (models/retry.py), a stream only until its first delta went out.

Tool calling (agent mode): `stream(..., tools=[...])` and `chat(..., tools=[...])` send OpenAI
function schemas; the reply's text streams as usual and its tool calls come with the end
(`StreamEnd.tool_calls`, `ChatResult.tool_calls`; models/tool_calls.py). The local llama.cpp model
refuses tools (`ToolCallingUnsupported`): see `LOCAL_TOOLS_REFUSAL`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from ragline import defaults
from ragline.models import local_engine
from ragline.models.local_engine import PROVIDER, LocalEngines, LocalModelError
from ragline.models.openai_stream import OpenAIStreamClient, serves_directly
from ragline.models.retry import RetryPolicy, count_retry, is_transient, litellm_module, wait_before_retry, with_retries
from ragline.models.think import Part as ChatDelta
from ragline.models.think import ThinkSplitter
from ragline.models.tool_calls import ToolCallAccumulator, ToolCallRequest

Message = dict[str, Any]
Tool = dict[str, Any]  # an OpenAI function schema: {"type": "function", "function": {"name", "description", "parameters"}}

# Measured on llama-cpp-python 0.3.36: with the GGUF's own chat template the tools are rendered into
# the prompt, but with tool_choice "auto" (the model chooses between a call and an answer, as an agent
# must) the reply comes back as plain text, the model's <tool_call> markup never parsed into calls;
# only a forced tool_choice (one named function, grammar-constrained) yields a call, which leaves the
# model no way to answer. So the loop cannot run on it, and agent mode is refused for it.
LOCAL_TOOLS_REFUSAL = ("agent mode needs a model with tool calling; the local model {model} (llama.cpp with the GGUF's chat template) "
                       "returns tool calls as plain text when it may choose between a call and an answer, so it cannot drive the "
                       "agent loop: give the assistant (or the request) a litellm chat model with tool calling")


class ChatModelError(RuntimeError):
    """The chat provider failed (connection, auth, bad request, timeout).

    `transient`: it failed for a reason that a later call may not meet (a 429, a 5xx, a dropped
    connection; retries already spent); False for a refused request, a timeout or a bad reply.
    """

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class ToolCallingUnsupported(ChatModelError):
    """The model cannot be given tools (the local llama.cpp model): agent mode is refused for it."""

    def __init__(self, model: str) -> None:
        super().__init__(LOCAL_TOOLS_REFUSAL.format(model=model))


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
    tool_calls: tuple[ToolCallRequest, ...] = ()  # the calls the model asked for (only when it was given tools)


@dataclass(frozen=True)
class ChatResult:
    content: str
    thinking: str = ""
    finish_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    tool_calls: tuple[ToolCallRequest, ...] = ()


def _usage_dict(usage: Any) -> dict[str, int]:
    if usage is None:
        return {}
    raw = usage if isinstance(usage, dict) else getattr(usage, "model_dump", lambda: {})()
    return {k: int(v) for k, v in raw.items() if k.endswith("_tokens") and isinstance(v, int)}


class ChatClient:
    """One chat model; construct once, call many times."""

    def __init__(self, model: str, api_base: str | None = None, api_key: str | None = None, timeout: float = defaults.CHAT_TIMEOUT_S,
                 retry: RetryPolicy = RetryPolicy(), direct: bool | None = None, engines: LocalEngines | None = None) -> None:
        """`direct`: read the provider with models/openai_stream.py (True), through litellm (False),
        or whichever fits the model (None: direct for an OpenAI-compatible server). `engines`: the
        root's local engines (`Services.local_engines`), which a `ragline/` model runs on."""
        self.model = model
        self.engines = engines
        self.api_base = api_base
        self.api_key = api_key
        self.timeout = timeout
        self.retry = retry
        use_direct = serves_directly(model, api_base) if direct is None else direct
        self._direct = OpenAIStreamClient(api_base or "", api_key, timeout) if use_direct and api_base else None

    def _kwargs(self, messages: list[Message], options: ChatOptions, tools: list[Tool] | None = None) -> dict[str, Any]:
        return {
            **({"tools": tools} if tools else {}),
            "model": self.model,
            "messages": messages,
            "api_base": self.api_base,
            "api_key": self.api_key,
            "timeout": self.timeout,  # httpx's: to connect, and between two reads (so also a stalled stream)
            "max_retries": 0,  # the retry policy retries, not the SDK (models/retry.py)
            "drop_params": True,  # a provider without seed/top_p support ignores them instead of failing
            **options.litellm_kwargs(),
        }

    def _direct_body(self, messages: list[Message], options: ChatOptions, tools: list[Tool] | None = None) -> dict[str, Any]:
        """The request as litellm sends it to an OpenAI-compatible server: options passed as they are."""
        return {"model": self.model.partition("/")[2], "messages": messages, **({"tools": tools} if tools else {}), **options.litellm_kwargs()}

    @property
    def is_local(self) -> bool:
        return self.model.startswith(f"{PROVIDER}/")

    @property
    def supports_tools(self) -> bool:
        """Whether the model can be given tools through this client (every litellm model may try; not the local one)."""
        return not self.is_local

    def _engine(self) -> local_engine.LocalChatEngine:
        if self.engines is None:
            raise LocalModelError(f"{self.model} runs on the local engines of a Services: build the client with Services.chat()")
        return self.engines.chat(self.model)

    def check_tools(self) -> None:
        """Raise ToolCallingUnsupported when this model cannot be given tools."""
        if not self.supports_tools:
            raise ToolCallingUnsupported(self.model)

    async def count_tokens(self, texts: list[str]) -> list[int]:
        """Tokens of each text as this model reads them: exact for the local model, litellm's count otherwise."""
        if self.is_local:
            return await asyncio.to_thread(self._engine().count_tokens, texts)
        litellm = await litellm_module()
        return [litellm.token_counter(model=self.model, text=text) for text in texts]

    async def _raw_chat(self, messages: list[Message], options: ChatOptions,
                        tools: list[Tool] | None = None) -> tuple[str, str, str | None, Any, tuple[ToolCallRequest, ...]]:
        """(content, provider reasoning, finish reason, usage, tool calls) of one call."""
        calls = ToolCallAccumulator()
        if self.is_local:  # straight to llama.cpp: no litellm import on the embedded default's path
            engine = self._engine()
            result = await local_engine.complete(engine, messages, local_engine.completion_kwargs(options.litellm_kwargs()))
            choice = result["choices"][0]
            return choice["message"].get("content") or "", "", choice.get("finish_reason"), result.get("usage"), ()
        if self._direct is not None:
            reply = await self._direct.complete(self._direct_body(messages, options, tools))
            choice = reply["choices"][0]
            said = choice.get("message") or {}
            reasoning = said.get("reasoning_content") or said.get("reasoning") or ""
            calls.feed(said.get("tool_calls"))
            return said.get("content") or "", reasoning, choice.get("finish_reason"), reply.get("usage"), calls.calls()
        litellm = await litellm_module()
        response = await litellm.acompletion(**self._kwargs(messages, options, tools))
        choice = response.choices[0]
        message = choice.message
        calls.feed(list(getattr(message, "tool_calls", None) or []))
        return (message.content or "", getattr(message, "reasoning_content", None) or "", choice.finish_reason, getattr(response, "usage", None),
                calls.calls())

    async def chat(self, messages: list[Message], options: ChatOptions = ChatOptions(), *, tools: list[Tool] | None = None) -> ChatResult:
        """One whole reply; with `tools`, the calls the model asked for come in `tool_calls`."""
        if tools:
            self.check_tools()
        try:
            if self.is_local:
                content, reasoning, finish_reason, usage, calls = await self._raw_chat(messages, options)
            else:
                content, reasoning, finish_reason, usage, calls = await with_retries(lambda: self._raw_chat(messages, options, tools),
                                                                                     self.retry, f"chat model {self.model}")
        except Exception as exc:
            raise ChatModelError(f"chat model {self.model} failed: {exc}", transient=is_transient(exc)) from exc
        splitter = ThinkSplitter()
        parts = [*splitter.feed(content), *splitter.flush()]
        return ChatResult(
            content="".join(p.text for p in parts if p.kind == "answer"),
            thinking=reasoning + "".join(p.text for p in parts if p.kind == "thinking"),
            finish_reason=finish_reason,
            usage=_usage_dict(usage),
            tool_calls=calls,
        )

    async def _local_chunks(self, messages: list[Message], options: ChatOptions) -> AsyncIterator[tuple[str, str, str | None, Any]]:
        engine = self._engine()
        async for part in local_engine.stream_parts(engine, messages, local_engine.completion_kwargs(options.litellm_kwargs())):
            choice = part["choices"][0]
            yield "", choice.get("delta", {}).get("content") or "", choice.get("finish_reason"), None

    async def _remote_chunks(self, messages: list[Message], options: ChatOptions, tools: list[Tool] | None,
                             calls: ToolCallAccumulator) -> AsyncIterator[tuple[str, str, str | None, Any]]:
        if self._direct is not None:
            chunks = self._direct.stream(self._direct_body(messages, options, tools), calls if tools else None)
            try:
                async for chunk in chunks:
                    yield chunk
            finally:
                await chunks.aclose()  # type: ignore[attr-defined]  # closes the provider's connection now
            return
        litellm = await litellm_module()
        response = await litellm.acompletion(stream=True, stream_options={"include_usage": True}, **self._kwargs(messages, options, tools))
        try:
            async for chunk in response:
                if not chunk.choices:
                    yield "", "", None, getattr(chunk, "usage", None)
                    continue
                choice = chunk.choices[0]
                delta = choice.delta
                if tools:
                    calls.feed(list(getattr(delta, "tool_calls", None) or []))
                yield (getattr(delta, "reasoning_content", None) or "", getattr(delta, "content", None) or "",
                       choice.finish_reason, getattr(chunk, "usage", None))
        finally:
            if hasattr(response, "aclose"):
                await response.aclose()

    async def stream(self, messages: list[Message], options: ChatOptions = ChatOptions(), *,
                     tools: list[Tool] | None = None) -> AsyncIterator[ChatDelta | StreamEnd]:
        """Deltas as they arrive, then exactly one StreamEnd, however often the provider says 'done'.
        With `tools`, the calls the model asked for come in the StreamEnd (ToolCallingUnsupported
        for the local model).

        A remote stream that fails before its first delta is opened again as the retry policy
        says; once a delta went out it is never repeated (the client has shown it): the error ends it.
        """
        if tools:
            self.check_tools()
        attempt = 0
        while True:
            progress = _StreamProgress()
            items = self._attempt(messages, options, progress, tools)
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

    async def _attempt(self, messages: list[Message], options: ChatOptions, progress: _StreamProgress,
                       tools: list[Tool] | None = None) -> AsyncIterator[ChatDelta | StreamEnd]:
        """One try at the stream; `progress` tells the caller whether anything went out."""
        calls = ToolCallAccumulator()  # per attempt: a retried stream starts its calls again
        chunks = self._local_chunks(messages, options) if self.is_local else self._remote_chunks(messages, options, tools, calls)
        splitter = ThinkSplitter()
        finish_reason: str | None = None
        usage: dict[str, int] = {}
        received = False
        try:
            async for reasoning, content, chunk_finish, chunk_usage in chunks:
                progress.started = True
                usage = _usage_dict(chunk_usage) or usage
                received = received or bool(reasoning or content or calls)
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
        yield StreamEnd(finish_reason, usage, calls.calls())


@dataclass
class _StreamProgress:
    started: bool = False  # the provider sent a chunk
    yielded: bool = False  # a delta went out to the caller: from here on, never retry
    counted: bool = False  # this attempt, a retry, was counted as recovered


class _EmptyStream(ValueError):
    """A 200 without stream data: malformed, so not retried (a ValueError is never transient)."""
