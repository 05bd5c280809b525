"""Never prefill the same fixed prompt prefix twice: the local model's KV state, cached per prefix.

At ~50 prompt tokens/s on two cores, every token the model reads costs ~20 ms before the first
answer token. The system prompt and the citation protocol are the same on every answer (several
hundred tokens), so their KV state is computed once and restored afterwards: from memory within a
process, from a file under the data directory across processes (so a one-shot `ragline ask` also
skips it).

The fixed prefix of a call is found without knowing the chat template: the call's system messages
are rendered twice, each followed by a different one-token user message, and the longest common
token prefix of the two is what every call with the same system messages starts with (the earlier
rounds of a conversation come after it, prefilled like the question). llama-cpp-python then
reuses that prefix by itself: its `generate` compares the prompt with the tokens already in the
KV cache and evaluates only the rest.
"""

from __future__ import annotations

import ctypes
import hashlib
import itertools
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MIN_PREFIX_TOKENS = 32  # shorter prefixes cost less to evaluate than to restore
MEMORY_ENTRIES = 8  # prefixes kept in memory: a handful of system prompts per process
_PROBES = ("\u2460", "\u2461")  # two one-token user messages that differ from the first token on


def _formatter(llm: Any) -> Any:
    """The chat template llama-cpp-python uses for this model, as a prompt formatter."""
    from llama_cpp import llama_chat_format

    template = llm.metadata.get("tokenizer.chat_template")
    if not template:
        return None

    def token_text(token_id: int) -> str:
        return llm._model.token_get_text(token_id) if token_id != -1 else ""

    return llama_chat_format.Jinja2ChatFormatter(
        template=template, eos_token=token_text(llm.token_eos()), bos_token=token_text(llm.token_bos())
    )


def _tokens(llm: Any, formatter: Any, messages: Sequence[dict]) -> list[int]:
    result = formatter(messages=list(messages))
    return llm.tokenize(result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True)


def common_prefix(first: Sequence[int], second: Sequence[int]) -> list[int]:
    size = 0
    for a, b in zip(first, second, strict=False):
        if a != b:
            break
        size += 1
    return list(first[:size])


class PrefixCache:
    """KV states of fixed prompt prefixes for one loaded llama.cpp model.

    Call `prime(messages)` under the model's generation lock right before a chat completion: it
    leaves the model's KV cache holding the call's fixed prefix (restored or freshly evaluated),
    so the completion evaluates only what follows it.
    """

    def __init__(self, llm: Any, directory: Path | None, model_id: str) -> None:
        self._llm = llm
        self._formatter = _formatter(llm)
        self._directory = directory
        self._model_id = model_id
        self._memory: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def fixed_prefix(self, messages: Sequence[dict]) -> list[int]:
        """The tokens every call with the same leading system messages starts with ([] when not worth caching).

        Only the system messages count: what follows them (earlier rounds of a conversation) differs
        from one conversation to the next, so a prefix holding it would be prefilled and stored for one
        call and never read again, while the system prompt's own state, cached by earlier calls, went
        unused: a second turn prefilled its whole system prompt again."""
        if self._formatter is None or not messages or messages[-1].get("role") != "user":
            return []
        system = list(itertools.takewhile(lambda message: message.get("role") == "system", messages[:-1]))
        if not system:
            return []
        try:
            probes = [_tokens(self._llm, self._formatter, [*system, {"role": "user", "content": p}]) for p in _PROBES]
            actual = _tokens(self._llm, self._formatter, messages)
        except Exception as exc:  # a template that cannot render these messages: no caching, never a failed answer
            log.debug("prompt cache: template failed: %s", exc)
            return []
        # The probes' last shared token (the newline after the role tag) may merge with a real
        # message's first characters: without it, every call with these system messages shares
        # one prefix, hence one cached state.
        prefix = common_prefix(common_prefix(*probes)[:-1], actual)
        return prefix if len(prefix) >= MIN_PREFIX_TOKENS else []

    def prime(self, messages: Sequence[dict]) -> int:
        """Make the KV cache start with the call's fixed prefix; return its length in tokens."""
        prefix = self.fixed_prefix(messages)
        if not prefix:
            return 0
        llm = self._llm
        if llm.n_tokens >= len(prefix) and llm.input_ids[: len(prefix)].tolist() == prefix:
            return len(prefix)  # already live from the previous call
        key = self._key(prefix)
        state = self._load(key)
        if state is not None and self._restore(prefix, state):
            return len(prefix)
        llm.reset()
        llm._ctx.kv_cache_clear()
        llm.eval(prefix)
        self._store(key, self._snapshot())
        return len(prefix)

    def _key(self, prefix: Sequence[int]) -> str:
        digest = hashlib.sha256(self._model_id.encode())
        digest.update(ctypes.string_at((ctypes.c_int32 * len(prefix))(*prefix), 4 * len(prefix)))
        return digest.hexdigest()[:32]

    def _snapshot(self) -> bytes:
        import llama_cpp

        ctx = self._llm._ctx.ctx
        size = llama_cpp.llama_state_seq_get_size(ctx, 0)
        buffer = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(ctx, buffer, size, 0)
        return bytes(buffer[:written])

    def _restore(self, prefix: list[int], state: bytes) -> bool:
        import llama_cpp

        llm = self._llm
        llm.reset()
        llm._ctx.kv_cache_clear()
        buffer = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
        if llama_cpp.llama_state_seq_set_data(llm._ctx.ctx, buffer, len(state), 0) != len(state):
            log.warning("prompt cache: a stored state did not load; evaluating the prefix instead")
            llm._ctx.kv_cache_clear()
            return False
        llm.input_ids[: len(prefix)] = prefix
        llm.n_tokens = len(prefix)
        llm._requires_eval = True  # the logits are not live: generate evaluates at least one token
        return True

    def _path(self, key: str) -> Path | None:
        return self._directory / f"{key}.kv" if self._directory else None

    def _load(self, key: str) -> bytes | None:
        with self._lock:
            if key in self._memory:
                self._memory.move_to_end(key)
                return self._memory[key]
        path = self._path(key)
        if path is None or not path.exists():
            return None
        try:
            state = path.read_bytes()
        except OSError:
            return None
        self._remember(key, state)
        return state

    def _store(self, key: str, state: bytes) -> None:
        self._remember(key, state)
        path = self._path(key)
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(f".partial-{os.getpid()}")
            partial.write_bytes(state)
            partial.replace(path)  # atomic: a reader never sees half a state
        except OSError as exc:  # a read-only data directory costs the cross-process cache only
            log.debug("prompt cache: not written: %s", exc)

    def _remember(self, key: str, state: bytes) -> None:
        with self._lock:
            self._memory[key] = state
            self._memory.move_to_end(key)
            while len(self._memory) > MEMORY_ENTRIES:
                self._memory.popitem(last=False)
