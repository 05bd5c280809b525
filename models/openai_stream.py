"""OpenAI-compatible chat completions read straight off the wire (aiohttp, orjson), without litellm.

Why: relaying many streams, litellm's per-chunk work (pydantic objects, cost and usage
bookkeeping, logging callbacks in threads) was ~70% of a server's CPU. A self-hosted
OpenAI-compatible server (vLLM, llama.cpp server, Ollama's /v1, LM Studio, the test suite's
scripted model) takes the request as sent, so nothing is lost by skipping litellm for it: Ragline
reads `data:` lines and parses each with orjson. OpenAI's own models (gpt-*, o*) keep going
through litellm, which maps their per-model parameters (max_completion_tokens, dropped
temperature); so do all other providers.

The transport is aiohttp, not httpx: relaying 100 streams at 20 chunks/s, httpx (httpcore, h11,
an anyio cancel scope per read, a pool that walks every connection) cost 500-800 µs of CPU per
chunk and aiohttp 33-38 µs (a throw-away script, uvloop, the stamped model of benchmarks/).

Errors keep the meaning models/retry.py gives them: an HTTP status travels as
`ProviderStatusError.status_code` with the response's headers (Retry-After), a refused or dropped
connection as a ConnectionError (`ProviderConnectionError`), a timeout (also the longest silence
inside a stream) as a TimeoutError, a malformed chunk as a JSONDecodeError. A stream that ends
with neither a finish reason nor [DONE] was cut short: `StreamCut`, a ConnectionError, like a
dropped connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import weakref
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import helpers as aiohttp_helpers
from yarl import URL

from ragline.models.tool_calls import ToolCallAccumulator

try:
    import orjson

    _loads: Callable[[bytes], Any] = orjson.loads  # raises orjson.JSONDecodeError, a json.JSONDecodeError
    _HAS_ORJSON = True
except ImportError:  # pragma: no cover - orjson is optional
    _loads = json.loads
    _HAS_ORJSON = False

OPENAI_FAMILIES = ("gpt-", "o1", "o3", "o4", "chatgpt-", "codex-")  # OpenAI's models: litellm maps their parameters
KEEPALIVE_S = 2.0  # idle pooled connections close well before a server's usual 5 s idle timeout would, mid-request
ERROR_BODY_MAX = 64 * 1024  # an error reply is read for its message, never whole
EVENT_MAX = 1024 * 1024  # one stream event (a chunk is a few hundred bytes): beyond this the provider is broken or hostile
DONE = b"[DONE]"

Chunk = tuple[str, str, str | None, dict[str, Any] | None]  # reasoning, content, finish reason, usage (as in models/chat.py)


def serves_directly(model: str, api_base: str | None) -> bool:
    """Whether `model` is an OpenAI-compatible server's model that this module can talk to."""
    provider, _, name = model.partition("/")
    return provider == "openai" and bool(api_base) and bool(name) and not name.lower().startswith(OPENAI_FAMILIES)


class ProviderStatusError(RuntimeError):
    """The provider answered with an HTTP error status (or put an error object in its stream)."""

    def __init__(self, message: str, status_code: int | None, response: aiohttp.ClientResponse | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.response = response  # models/retry.py reads Retry-After from its headers


class ProviderConnectionError(ConnectionError):
    """No connection to the provider, or it dropped: worth a retry (models/retry.py)."""


class ProviderTimeout(TimeoutError):
    """No connection, or no data, within the timeout."""


class StreamCut(ConnectionError):
    """The stream ended without a finish reason or [DONE]: the rest of the answer was lost."""


class SSEDataParser:
    """The `data` of each Server-Sent Event in bytes that arrive in arbitrary pieces.

    Follows the SSE spec's line rules (CRLF, LF or CR ends a line; one optional space after the
    colon; several data lines join with LF; a blank line dispatches; comments and other fields
    are ignored), on bytes, so a multi-byte character split across reads is never decoded half.
    """

    def __init__(self) -> None:
        self._rest = b""
        self._data: list[bytes] = []
        self._size = 0  # bytes in _data

    def feed(self, chunk: bytes) -> list[bytes]:
        buffer = self._rest + chunk
        lines = buffer.splitlines(keepends=True)
        # the last line is still open without its ending; a lone CR may yet be the first half of CRLF
        if lines and (not lines[-1].endswith((b"\n", b"\r")) or lines[-1].endswith(b"\r") and not lines[-1].endswith(b"\r\n")):
            self._rest = lines.pop()
        else:
            self._rest = b""
        if len(self._rest) > EVENT_MAX:
            raise ValueError(f"a stream line longer than {EVENT_MAX} bytes")  # malformed: never kept growing
        return self._lines(lines)

    def close(self) -> list[bytes]:
        """Events completed by a final CR; an event without its blank line is dropped, as the spec says."""
        rest, self._rest = self._rest, b""
        events = self._lines([rest]) if rest.endswith(b"\r") else []
        self._data, self._size = [], 0
        return events

    def _lines(self, lines: list[bytes]) -> list[bytes]:
        events: list[bytes] = []
        for raw in lines:
            line = raw.rstrip(b"\r\n") if raw.endswith(b"\n") else raw.rstrip(b"\r")
            if not line:
                if self._data:
                    events.append(b"\n".join(self._data))
                    self._data, self._size = [], 0
                continue
            if line.startswith(b"data"):
                field, _, value = line.partition(b":")
                if field == b"data":
                    self._data.append(value[1:] if value.startswith(b" ") else value)
                    self._size += len(value) + 1
                    if self._size > EVENT_MAX:  # data lines that no blank line ends
                        raise ValueError(f"a stream event longer than {EVENT_MAX} bytes")
        return events


def parse_chunk(payload: bytes, tool_calls: ToolCallAccumulator | None = None) -> Chunk:
    """One `chat.completion.chunk` event as (reasoning, content, finish reason, usage); its
    `tool_calls` deltas go to `tool_calls` when given (and are ignored otherwise)."""
    body = _loads(payload)
    if not isinstance(body, dict):
        raise json.JSONDecodeError("a stream chunk is not a JSON object", payload.decode("utf-8", "replace"), 0)
    if body.get("error") is not None:  # vLLM and others report a failure inside the stream
        raise _error_from_body(body, None)
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else None
    choices = body.get("choices") or []
    if not choices:
        return "", "", None, usage
    choice = choices[0]
    delta = choice.get("delta") or {}
    reasoning = delta.get("reasoning_content") or delta.get("reasoning") or ""  # `reasoning` on vLLM >= 0.10 and OpenRouter
    content = delta.get("content") or ""
    if tool_calls is not None:
        tool_calls.feed(delta.get("tool_calls"))
    if not isinstance(reasoning, str) or not isinstance(content, str):
        raise json.JSONDecodeError(f"a delta that is not text: {str(delta)[:200]}", "", 0)
    return reasoning, content, choice.get("finish_reason"), usage


def _error_from_body(body: Any, response: aiohttp.ClientResponse | None) -> ProviderStatusError:
    status = response.status if response is not None else None
    error = body.get("error") if isinstance(body, dict) else None
    message = (error.get("message") if isinstance(error, dict) else error) or body
    code = error.get("code") if isinstance(error, dict) else None
    if status is None and isinstance(code, int):
        status = code
    prefix = f"HTTP {status}: " if status is not None else ""
    return ProviderStatusError(f"{prefix}{str(message)[:500]}", status, response)


async def _raise_for_status(response: aiohttp.ClientResponse) -> None:
    if response.status < 400:
        return
    body = b""
    async for piece in response.content.iter_any():
        body += piece
        if len(body) >= ERROR_BODY_MAX:
            break
    try:
        parsed: Any = _loads(body)
    except ValueError:
        parsed = {"error": body.decode("utf-8", "replace")[:500] or response.reason or ""}
    raise _error_from_body(parsed, response)


class _Seen:
    """What a stream delivered so far: whether it ended properly or was cut."""

    def __init__(self, tool_calls: ToolCallAccumulator | None = None) -> None:
        self.events = 0
        self.ended = False
        self.tool_calls = tool_calls

    def chunk(self, payload: bytes) -> Chunk:
        chunk = parse_chunk(payload, self.tool_calls)
        self.events += 1
        self.ended = self.ended or chunk[2] is not None
        return chunk


# Every pool opened on a loop, for close_sessions: aiohttp wants its sessions closed, and says so
# on stderr ("Unclosed client session") when one is collected open.
_OPEN: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[aiohttp.ClientSession]] = weakref.WeakKeyDictionary()


async def close_sessions() -> None:
    """Close the connection pools opened on the running loop (Services.aclose calls it at shutdown)."""
    for session in _OPEN.pop(asyncio.get_running_loop(), []):
        await session.close()


def _opened(loop: asyncio.AbstractEventLoop, session: aiohttp.ClientSession) -> None:
    sessions = _OPEN.get(loop)
    if sessions is None:
        sessions = _OPEN[loop] = []
        # when the loop goes (or the interpreter exits first), what no host closed is closed quietly
        weakref.finalize(loop, _close_left_open, sessions)
    sessions.append(session)


def _close_left_open(sessions: list[aiohttp.ClientSession]) -> None:
    """Pools no host closed (a test's loop, a graph that Studio hosts): their sockets closed now,
    with no loop left to await on, instead of aiohttp's "Unclosed client session" on stderr."""
    for session in sessions:
        if not session.closed:
            with contextlib.suppress(Exception):
                session.connector._close()  # type: ignore[union-attr]  # sync (close() is a coroutine): the transports, at once
            session.detach()
    sessions.clear()


@dataclass(frozen=True)
class _Route:
    """How requests to one server go out, read from the environment once: its proxy (HTTPS_PROXY,
    NO_PROXY, ...) and, when no API key is sent, ~/.netrc credentials. aiohttp's trust_env reads
    both again on every request, in two executor jobs: 7% of a plain turn's CPU under load."""

    proxy: URL | None = None
    proxy_auth: aiohttp.BasicAuth | None = None
    auth: aiohttp.BasicAuth | None = None


def env_route(url: str, *, has_key: bool) -> _Route:
    target = URL(url)
    proxy = proxy_auth = auth = None
    with contextlib.suppress(LookupError):
        proxy, proxy_auth = aiohttp_helpers.get_env_proxy_for_url(target)
    if not has_key and target.host is not None:  # aiohttp refuses netrc credentials beside an Authorization header
        with contextlib.suppress(LookupError):
            auth = aiohttp_helpers.basicauth_from_netrc(aiohttp_helpers.netrc_from_env(), target.host)
    return _Route(proxy, proxy_auth, auth)


class OpenAIStreamClient:
    """Chat completions of one OpenAI-compatible server; one connection pool per event loop."""

    def __init__(self, api_base: str, api_key: str | None, timeout: float) -> None:
        self.url = api_base.rstrip("/") + "/chat/completions"
        key = api_key or os.environ.get("OPENAI_API_KEY")
        self.headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
        self.timeout = timeout
        self._route: _Route | None = None
        # a pool is bound to the loop that opened its sockets (tests and CLI runs use several loops)
        self._sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession] = weakref.WeakKeyDictionary()

    def _session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None or session.closed:
            # no cap on connections (limit=0): every concurrent answer is one stream; a cap would queue answers
            connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=KEEPALIVE_S)
            # `timeout`: to connect, and between two reads (so also a stalled stream)
            timeout = aiohttp.ClientTimeout(total=None, connect=self.timeout, sock_connect=self.timeout, sock_read=self.timeout)
            session = aiohttp.ClientSession(connector=connector, headers=self.headers, timeout=timeout)
            self._sessions[loop] = session
            _opened(loop, session)
        return session

    def _post(self, body: bytes) -> Any:
        """POST to the server through the environment's proxy (as httpx's trust_env did), read once."""
        if self._route is None:
            self._route = env_route(self.url, has_key="Authorization" in self.headers)
        route = self._route
        return self._session().post(self.url, data=body, proxy=route.proxy, proxy_auth=route.proxy_auth, auth=route.auth)

    def _failure(self, exc: Exception) -> Exception:
        """aiohttp's errors in the terms models/retry.py reads: a timeout, or a lost connection."""
        if isinstance(exc, TimeoutError):  # aiohttp's connect and read timeouts are TimeoutErrors
            phase = "connecting" if isinstance(exc, aiohttp.ConnectionTimeoutError) else "waiting for data"
            return ProviderTimeout(f"timed out after {self.timeout:g} s {phase}: {type(exc).__name__}")
        return ProviderConnectionError(f"{type(exc).__name__}: {exc}")

    async def stream(self, body: dict[str, Any], tool_calls: ToolCallAccumulator | None = None) -> AsyncIterator[Chunk]:
        """The chunks of one streamed completion; closing the iterator closes the connection.
        The reply's tool-call deltas go to `tool_calls` when given."""
        request = {**body, "stream": True, "stream_options": {"include_usage": True}}
        parser, seen = SSEDataParser(), _Seen(tool_calls)
        try:
            async with self._post(_dumps(request)) as response:
                await _raise_for_status(response)
                async for piece in response.content.iter_any():  # decoded: a proxy may gzip the stream
                    for payload in parser.feed(piece):
                        if payload == DONE:
                            return  # leaving the block closes the response (and its connection, if unread)
                        yield seen.chunk(payload)
                for payload in parser.close():
                    if payload == DONE:
                        return
                    yield seen.chunk(payload)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise self._failure(exc) from exc
        # a whole body without a single event is a malformed reply, not a cut (models/chat.py says so)
        if seen.events and not seen.ended:
            raise StreamCut("the stream ended without a finish reason or [DONE]")

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """One completion, not streamed: the reply's JSON object."""
        try:
            async with self._post(_dumps({**body, "stream": False})) as response:
                await _raise_for_status(response)
                content = await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise self._failure(exc) from exc
        reply = _loads(content)
        if not isinstance(reply, dict) or not reply.get("choices"):
            raise json.JSONDecodeError("a completion without choices", content[:200].decode("utf-8", "replace"), 0)
        return reply


def _dumps(request: dict[str, Any]) -> bytes:
    return orjson.dumps(request) if _HAS_ORJSON else json.dumps(request).encode()
