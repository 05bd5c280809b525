"""Retries of remote model calls: exponential backoff with jitter, Retry-After honoured.

Ragline owns retries, so that chat, embedding and rerank behave alike whatever the provider:
litellm only retries through the OpenAI SDK (OpenAI-compatible providers, two retries by
default) and not at all for Cohere, Jina or Ollama. Every call therefore asks litellm for
`max_retries=0`; `import_litellm` also zeroes litellm's default, because its OpenAI embedding
path reads `max_retries or DEFAULT_MAX_RETRIES` and so turns an explicit 0 back into 2.

What is retried: a 429 (after its Retry-After, when that is not too long), a 5xx, a refused or
dropped connection. What is not: other 4xx (the same request fails the same way), a timeout
(the call already spent its whole budget; the caller degrades instead), and a malformed body
(litellm reports it as a 500, but the provider answered 200: asking again rarely helps).

Every retry is counted once, by the kind of model (chat, embedding, rerank) and its outcome:
`recovered` (the retried call answered), `retried_again` (it failed and is tried once more),
`gave_up` (it failed and the call fails). /metrics exposes the counts (api/metrics.py).
"""

from __future__ import annotations

import asyncio
import collections
import email.utils
import json
import logging
import random
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

from ragline import defaults

T = TypeVar("T")
log = logging.getLogger("ragline.models")
_sleep = asyncio.sleep  # tests replace it to record the waits instead of sleeping
KINDS = ("chat", "embedding", "rerank")
OUTCOMES = ("recovered", "retried_again", "gave_up")
_retries: collections.Counter[tuple[str, str]] = collections.Counter()  # process-wide: one provider, many apps


def count_retry(kind: str, outcome: str) -> None:
    """One retry ended: `outcome` is one of OUTCOMES."""
    _retries[(kind, outcome)] += 1


def retry_counts() -> dict[tuple[str, str], int]:
    """Retries of this process so far by (kind, outcome), every pair of KINDS and OUTCOMES included."""
    return {(kind, outcome): _retries[(kind, outcome)] for kind in KINDS for outcome in OUTCOMES} | dict(_retries)


def kind_of(what: str) -> str:
    """The kind of model a call names: callers describe it as '<kind> model <name>'."""
    return what.split(" ", 1)[0]


async def litellm_module() -> ModuleType:
    """import_litellm for a coroutine: the first import (seconds; a minute on a loaded host, or
    behind the warm-up thread's import lock) runs in a thread, never on the event loop, where it
    would stop every stream, heartbeat and lease renewal of the process meanwhile."""
    module = sys.modules.get("litellm")  # there from the start of an import; import_litellm's flag says it finished
    if module is not None and getattr(module, "suppress_debug_info", False):
        return module
    return await asyncio.to_thread(import_litellm)


def import_litellm() -> ModuleType:
    """litellm, imported on first use (it costs seconds), with its own retries off and its banner quiet."""
    import litellm

    if getattr(litellm, "DEFAULT_MAX_RETRIES", 0) != 0:
        setattr(litellm, "DEFAULT_MAX_RETRIES", 0)  # noqa: B010 (Final in litellm's stubs); see the docstring: else embeddings retry twice under ours
    litellm.suppress_debug_info = True  # no "Give Feedback" banner on stdout for every provider error
    return litellm


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to wait between calls to one remote model."""

    retries: int = defaults.PROVIDER_RETRIES
    base_s: float = defaults.PROVIDER_RETRY_BASE_S
    max_s: float = defaults.PROVIDER_RETRY_MAX_S
    retry_after_max_s: float = defaults.PROVIDER_RETRY_AFTER_MAX_S

    @classmethod
    def from_settings(cls, settings: Any) -> RetryPolicy:
        return cls(settings.provider_retries, settings.provider_retry_base_s, settings.provider_retry_max_s,
                   settings.provider_retry_after_max_s)

    def backoff(self, attempt: int, rng: Callable[[], float] = random.random) -> float:
        """Wait before retry `attempt` (0-based): base*2^attempt capped, jittered into [half, full]
        so that replicas failing together do not all come back at the same instant."""
        cap = min(self.max_s, self.base_s * 2**attempt)
        return cap / 2 + rng() * cap / 2

    def delay_for(self, exc: BaseException, attempt: int, rng: Callable[[], float] = random.random) -> float | None:
        """Seconds to wait before trying again after `exc` on retry `attempt`, or None: give up."""
        if attempt >= self.retries or not is_transient(exc):
            return None
        wait = retry_after_s(exc)
        if wait is None:
            return self.backoff(attempt, rng)
        return wait if wait <= self.retry_after_max_s else None


def causes(exc: BaseException) -> Iterator[BaseException]:
    """The exception and what caused it: litellm wraps the SDK's error, which wraps the transport's."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, TimeoutError) or "timeout" in type(exc).__name__.lower()


def _is_connection_failure(exc: BaseException) -> bool:
    """A refused, reset or dropped connection (builtin, httpx or aiohttp), not a timeout."""
    if isinstance(exc, ConnectionError):
        return True
    import httpx  # litellm's own transport: already imported whenever a provider call failed

    return isinstance(exc, httpx.TransportError) and not isinstance(exc, httpx.TimeoutException)


def is_transient(exc: BaseException) -> bool:
    """Whether the same call may well succeed a moment later."""
    chain = list(causes(exc))
    if any(_is_timeout(e) or isinstance(e, json.JSONDecodeError) for e in chain):
        return False
    if any(_is_connection_failure(e) for e in chain):
        return True
    status = next((s for e in chain if isinstance(s := getattr(e, "status_code", None), int)), None)
    return status is not None and (status == 429 or status >= 500)


def _header(exc: BaseException, name: str) -> str | None:
    """A response header of the failed call: on the SDK's response, or as litellm copied them."""
    for error in causes(exc):
        for headers in (getattr(getattr(error, "response", None), "headers", None), getattr(error, "litellm_response_headers", None)):
            if headers and (value := headers.get(name)) is not None:
                return str(value)
    return None


def retry_after_s(exc: BaseException, now: Callable[[], float] = time.time) -> float | None:
    """The provider's Retry-After (seconds, or an HTTP date; also OpenAI's retry-after-ms), if any."""
    if (millis := _header(exc, "retry-after-ms")) is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = _header(exc, "retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - now())
    except (TypeError, ValueError):
        return None


async def with_retries(call: Callable[[], Awaitable[T]], policy: RetryPolicy, what: str) -> T:
    """`call()`, tried again after transient failures as the policy says; the last error is raised."""
    attempt = 0
    while True:
        try:
            result = await call()
        except Exception as exc:
            delay = policy.delay_for(exc, attempt)
            if attempt:
                count_retry(kind_of(what), "gave_up" if delay is None else "retried_again")
            if delay is None:
                raise
            await wait_before_retry(what, exc, attempt, delay)
            attempt += 1
        else:
            if attempt:
                count_retry(kind_of(what), "recovered")
            return result


async def wait_before_retry(what: str, exc: BaseException, attempt: int, delay: float) -> None:
    """Log the retry (with the run's ids, see ragline/logs.py) and wait."""
    log.warning("%s failed (%s), retry %d in %.2fs", what, type(exc).__name__, attempt + 1, delay)
    await _sleep(delay)
