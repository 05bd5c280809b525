"""Chat models through litellm: one call, or a stream that keeps reasoning apart from the answer.

Any litellm provider works (OpenAI, Ollama, DeepSeek, an OpenAI-compatible base URL); model
strings starting with `ragline/` go to the local llama.cpp model. Reasoning arrives either as the
provider's `reasoning_content` or inline between <think> tags; both come out as THINKING deltas.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import litellm

from ragline.models.local_provider import PROVIDER, register_local_provider
from ragline.models.think import Part as ChatDelta
from ragline.models.think import ThinkSplitter

Message = dict[str, Any]


class ChatModelError(RuntimeError):
    """The chat provider failed (connection, auth, bad request, timeout)."""


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

    def __init__(self, model: str, api_base: str | None = None, api_key: str | None = None, timeout: float = 600.0) -> None:
        self.model = model
        self.api_base = api_base
        self.api_key = api_key
        self.timeout = timeout
        if model.startswith(f"{PROVIDER}/"):
            register_local_provider()

    def _kwargs(self, messages: list[Message], options: ChatOptions) -> dict[str, Any]:
        return {
            "model": self.model,
            "messages": messages,
            "api_base": self.api_base,
            "api_key": self.api_key,
            "timeout": self.timeout,
            "drop_params": True,  # a provider without seed/top_p support ignores them instead of failing
            **options.litellm_kwargs(),
        }

    @property
    def is_local(self) -> bool:
        return self.model.startswith(f"{PROVIDER}/")

    async def count_tokens(self, texts: list[str]) -> list[int]:
        """Tokens of each text as this model reads them: exact for the local model, litellm's count otherwise."""
        if self.is_local:
            from ragline.models.local_provider import CHAT_ENGINE

            return await asyncio.to_thread(CHAT_ENGINE.count_tokens, texts)
        return [litellm.token_counter(model=self.model, text=text) for text in texts]

    async def chat(self, messages: list[Message], options: ChatOptions = ChatOptions()) -> ChatResult:
        try:
            response = await litellm.acompletion(**self._kwargs(messages, options))
        except Exception as exc:
            raise ChatModelError(f"chat model {self.model} failed: {exc}") from exc
        choice = response.choices[0]
        message = choice.message
        splitter = ThinkSplitter()
        parts = [*splitter.feed(message.content or ""), *splitter.flush()]
        thinking = (getattr(message, "reasoning_content", None) or "") + "".join(p.text for p in parts if p.kind == "thinking")
        return ChatResult(
            content="".join(p.text for p in parts if p.kind == "answer"),
            thinking=thinking,
            finish_reason=choice.finish_reason,
            usage=_usage_dict(getattr(response, "usage", None)),
        )

    async def stream(self, messages: list[Message], options: ChatOptions = ChatOptions()) -> AsyncIterator[ChatDelta | StreamEnd]:
        """Deltas as they arrive, then exactly one StreamEnd, however often the provider says 'done'."""
        try:
            response = await litellm.acompletion(stream=True, stream_options={"include_usage": True}, **self._kwargs(messages, options))
        except Exception as exc:
            raise ChatModelError(f"chat model {self.model} failed: {exc}") from exc
        splitter = ThinkSplitter()
        finish_reason: str | None = None
        usage: dict[str, int] = {}
        received = False
        try:
            async for chunk in response:
                usage = _usage_dict(getattr(chunk, "usage", None)) or usage
                if not chunk.choices:
                    continue
                choice = chunk.choices[0]
                delta = choice.delta
                reasoning = getattr(delta, "reasoning_content", None)
                received = received or bool(reasoning or getattr(delta, "content", None))
                if reasoning:
                    yield ChatDelta("thinking", reasoning)
                for part in splitter.feed(getattr(delta, "content", None) or ""):
                    yield part
                finish_reason = finish_reason or choice.finish_reason  # the first end signal counts
        except Exception as exc:
            raise ChatModelError(f"chat model {self.model} failed mid-stream: {exc}") from exc
        finally:
            if hasattr(response, "aclose"):
                await response.aclose()
        if not received and not usage:
            # no text and no usage: a 200 that carried no stream at all (a malformed reply), not an answer
            raise ChatModelError(f"chat model {self.model} answered with no stream data")
        for part in splitter.flush():
            yield part
        yield StreamEnd(finish_reason, usage)
