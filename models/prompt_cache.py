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

Past the fixed prefix, prompts recur too: questions about the same part of a knowledge base get the
same passage first in their context. A start that two recent prompts share is kept in memory
(RecurringStarts) and restored for the next prompt that begins with it.
"""

from __future__ import annotations

import ctypes
import hashlib
import itertools
import logging
import os
import threading
from collections import OrderedDict, deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MIN_PREFIX_TOKENS = 32  # shorter prefixes cost less to evaluate than to restore
MEMORY_ENTRIES = 8  # prefixes kept in memory: a handful of system prompts per process
SHARED_MIN_TOKENS = 32  # a recurring start must run this far past the fixed prefix to be kept
RECENT_PROMPTS = 16  # the prompts each new one is compared with to find a recurring start
RECURRING_MAX_BYTES = 96 * 2**20  # states of recurring starts kept in memory (~28 KB a token for the 1.5B model)
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
        self._recurring = RecurringStarts()
        self._last: tuple[int, list[int]] | None = None  # the primed call's fixed prefix length and prompt, for `learn`

    def fixed_prefix(self, messages: Sequence[dict]) -> list[int]:
        """The tokens every call with the same leading system messages starts with ([] when not worth caching)."""
        return self._split(messages)[0]

    def _split(self, messages: Sequence[dict]) -> tuple[list[int], list[int]]:
        """The call's fixed prefix ([] when not worth caching) and its whole prompt ([] when not rendered).

        Only the system messages count: what follows them (earlier rounds of a conversation) differs
        from one conversation to the next, so a prefix holding it would be prefilled and stored for one
        call and never read again, while the system prompt's own state, cached by earlier calls, went
        unused: a second turn prefilled its whole system prompt again."""
        if self._formatter is None or not messages or messages[-1].get("role") != "user":
            return [], []
        system = list(itertools.takewhile(lambda message: message.get("role") == "system", messages[:-1]))
        if not system:
            return [], []
        try:
            probes = [_tokens(self._llm, self._formatter, [*system, {"role": "user", "content": p}]) for p in _PROBES]
            actual = _tokens(self._llm, self._formatter, messages)
        except Exception as exc:  # a template that cannot render these messages: no caching, never a failed answer
            log.debug("prompt cache: template failed: %s", exc)
            return [], []
        # The probes' last shared token (the newline after the role tag) may merge with a real
        # message's first characters: without it, every call with these system messages shares
        # one prefix, hence one cached state.
        prefix = common_prefix(common_prefix(*probes)[:-1], actual)
        return (prefix if len(prefix) >= MIN_PREFIX_TOKENS else []), actual

    def prime(self, messages: Sequence[dict]) -> int:
        """Make the KV cache start with the call's fixed prefix, or with a longer start of the prompt
        that recurred (RecurringStarts); return its length in tokens. Call `learn` after the completion."""
        prefix, prompt = self._split(messages)
        self._last = (len(prefix), prompt) if prefix else None
        if not prefix:
            return 0
        llm = self._llm
        live = len(common_prefix(llm.input_ids[: llm.n_tokens].tolist(), prompt))
        recurring = self._recurring.longest(prompt)
        if recurring is not None and len(recurring[0]) > max(live, len(prefix)) and self._restore(list(recurring[0]), recurring[1]):
            return len(recurring[0])
        if live >= len(prefix):
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

    def learn(self) -> None:
        """After a completion: when this prompt starts like a recent one for SHARED_MIN_TOKENS past
        the fixed prefix (the same passage first in the context), keep the state of that start, so
        that the next prompt starting so skips it. The KV cache is cut back to that start first."""
        if self._last is None:
            return
        fixed, prompt = self._last
        self._last = None
        shared = self._recurring.shared_start(prompt, fixed + SHARED_MIN_TOKENS)
        llm = self._llm
        if not shared or llm.n_tokens < shared or llm.input_ids[:shared].tolist() != prompt[:shared]:
            return
        if not llm._ctx.kv_cache_seq_rm(0, shared, -1):
            return
        llm.n_tokens = shared
        llm._requires_eval = True  # the logits are the answer's last, not this start's
        self._recurring.keep(tuple(prompt[:shared]), self._snapshot())

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


class RecurringStarts:
    """States of prompt starts that recur past the fixed prefix: two questions whose contexts begin
    with the same passage share the system prompt, the passage and what surrounds it. Each prompt
    is compared with the last RECENT_PROMPTS; a start two of them share is kept (in memory only,
    the least recently used dropped past RECURRING_MAX_BYTES) and restored for the next prompt
    that begins with it, so that its prefill covers only the rest."""

    def __init__(self) -> None:
        self._recent: deque[list[int]] = deque(maxlen=RECENT_PROMPTS)
        self._states: OrderedDict[tuple[int, ...], bytes] = OrderedDict()
        self._bytes = 0

    def longest(self, prompt: Sequence[int]) -> tuple[tuple[int, ...], bytes] | None:
        """The longest kept start of `prompt` (shorter than it: one token at least is left to evaluate)."""
        best: tuple[int, ...] | None = None
        for start in self._states:
            if len(start) < len(prompt) and (best is None or len(start) > len(best)) and tuple(prompt[: len(start)]) == start:
                best = start
        if best is None:
            return None
        self._states.move_to_end(best)
        return best, self._states[best]

    def shared_start(self, prompt: list[int], floor: int) -> int:
        """The length of the longest start `prompt` shares with a recent prompt when it reaches
        `floor` and is not kept yet, else 0; `prompt` becomes a recent prompt."""
        shared = max((len(common_prefix(prompt, other)) for other in self._recent), default=0)
        self._recent.append(prompt)
        shared = min(shared, len(prompt) - 1)
        return shared if shared >= floor and tuple(prompt[:shared]) not in self._states else 0

    def keep(self, start: tuple[int, ...], state: bytes) -> None:
        self._states[start] = state
        self._bytes += len(state)
        while self._bytes > RECURRING_MAX_BYTES and len(self._states) > 1:
            _, dropped = self._states.popitem(last=False)
            self._bytes -= len(dropped)
