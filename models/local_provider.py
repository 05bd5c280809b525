"""The local models (models/local_engine.py) as the litellm custom provider `ragline/`.

Ragline's own clients call the engines directly; this adapter is for code that goes through
litellm with a `ragline/...` model string (it imports litellm, which costs seconds at start-up).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import closing
from typing import Any

import litellm
from litellm.llms.custom_llm import CustomLLM
from litellm.types.utils import EmbeddingResponse, GenericStreamingChunk, ModelResponse

from ragline.models.local_engine import EMBEDDING_ENGINE, PROVIDER, LocalEngines, completion_kwargs, stream_parts

litellm.suppress_debug_info = True  # errors reach the user as one line of ours, not litellm banners


def _generic_chunk(part: dict[str, Any]) -> GenericStreamingChunk:
    choice = part["choices"][0]
    finish = choice.get("finish_reason")
    return GenericStreamingChunk(
        text=choice.get("delta", {}).get("content") or "",
        is_finished=finish is not None,
        finish_reason=finish or "",
        usage=None,
        index=0,
        tool_use=None,
    )


def _model(model: str) -> str:
    """litellm hands a custom provider the name without its `ragline/` prefix."""
    return model if model.startswith(f"{PROVIDER}/") else f"{PROVIDER}/{model}"


def _stream_chunks(engines: LocalEngines, model: str, messages: list, optional_params: dict,
                   stop: threading.Event) -> Iterator[GenericStreamingChunk]:
    with closing(engines.chat(_model(model)).generate(messages, completion_kwargs(optional_params), stream=True)) as parts:
        for part in parts:
            if stop.is_set():
                break
            yield _generic_chunk(part)


class LocalProvider(CustomLLM):
    """litellm custom provider: `ragline/<name>` chat and embedding models, on one root's engines."""

    def __init__(self, engines: LocalEngines) -> None:
        super().__init__()
        self.engines = engines

    def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> ModelResponse:
        optional_params = kwargs.get("optional_params") or {}
        model_response: ModelResponse = kwargs["model_response"]
        (result,) = self.engines.chat(_model(model)).generate(messages, completion_kwargs(optional_params), stream=False)
        choice = result["choices"][0]
        model_response.choices[0].message.content = choice["message"].get("content") or ""
        model_response.choices[0].finish_reason = choice.get("finish_reason") or "stop"
        model_response.model = model
        usage = result.get("usage") or {}
        model_response.usage = litellm.Usage(**usage) if usage else litellm.Usage()  # type: ignore[attr-defined]
        return model_response

    async def acompletion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> ModelResponse:
        return await asyncio.to_thread(self.completion, model, messages, *args, **kwargs)

    def streaming(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Iterator[GenericStreamingChunk]:
        yield from _stream_chunks(self.engines, model, messages, kwargs.get("optional_params") or {}, threading.Event())

    async def astreaming(  # type: ignore[override]  # litellm passes its many arguments by keyword: taken as **kwargs
        self, model: str, messages: list, *args: Any, **kwargs: Any
    ) -> AsyncIterator[GenericStreamingChunk]:
        async for part in stream_parts(self.engines.chat(_model(model)), messages, completion_kwargs(kwargs.get("optional_params") or {})):
            yield _generic_chunk(part)

    def embedding(self, model: str, input: list, model_response: EmbeddingResponse, *args: Any, **kwargs: Any) -> EmbeddingResponse:
        optional_params = kwargs.get("optional_params") or {}
        is_query = optional_params.get("input_type") == "query"
        started = time.perf_counter()
        vectors = EMBEDDING_ENGINE.encode([str(text) for text in input], is_query)
        model_response.data = [
            {"object": "embedding", "index": i, "embedding": vector} for i, vector in enumerate(vectors)
        ]
        model_response.model = model
        model_response._response_ms = (time.perf_counter() - started) * 1000
        return model_response

    async def aembedding(self, model: str, input: list, model_response: EmbeddingResponse, *args: Any, **kwargs: Any) -> EmbeddingResponse:
        return await asyncio.to_thread(self.embedding, model, input, model_response, *args, **kwargs)


def register_local_provider(engines: LocalEngines) -> None:
    """Make `ragline/...` model strings resolve to these local engines in litellm (`Services.local_engines`);
    litellm's provider map is global, so the last root registered serves them."""
    litellm.custom_provider_map = [
        entry for entry in litellm.custom_provider_map if entry.get("provider") != PROVIDER
    ] + [{"provider": PROVIDER, "custom_handler": LocalProvider(engines)}]
    from litellm.utils import custom_llm_setup

    custom_llm_setup()
