"""What every request must pass before any route sees it (pure ASGI middleware).

- `RequestLimits`: too many headers, one header line too long, or all headers together too
  large is a 431. Bodies are bounded where they are read (api/inputs.py, the multipart upload).
- `KeyLimits`: per API key, a request rate (token bucket) and a number of concurrent answer
  streams; over either, 429 with Retry-After.
- `LoopbackOnly`: in dev mode (no API keys, listening on loopback) only a browser on this machine
  may talk to the service. A foreign Host (DNS rebinding) or a cross-site Origin is a 403, so a
  web page elsewhere cannot drive the keyless API through the user's browser.
"""

from __future__ import annotations

import ipaddress
import json
import math
import uuid
from urllib.parse import urlsplit

from starlette.datastructures import Headers, QueryParams
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ragline import defaults
from ragline.api.auth import accepts_query_key, key_digest, presented_key
from ragline.logs import log_ids
from ragline.service.key_limits import Limiter


def header_problem(headers: list[tuple[bytes, bytes]]) -> str | None:
    if len(headers) > defaults.HEADERS_MAX_COUNT:
        return f"a request may carry at most {defaults.HEADERS_MAX_COUNT} headers"
    total = 0
    for name, value in headers:
        size = len(name) + len(value)
        if size > defaults.HEADER_MAX_BYTES:
            return f"a header line may be at most {defaults.HEADER_MAX_BYTES} bytes"
        total += size
    if total > defaults.HEADERS_MAX_TOTAL_BYTES:
        return f"all headers together may be at most {defaults.HEADERS_MAX_TOTAL_BYTES} bytes"
    return None


async def _refuse(send: Send, status: int, code: str, message: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


class HeaderCheck:
    """Refuses an HTTP request whose headers `problem` objects to, with `status` and `code`."""

    status, code = 400, "bad_request"

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    @staticmethod
    def problem(headers: list[tuple[bytes, bytes]]) -> str | None:
        raise NotImplementedError

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (problem := self.problem(scope.get("headers", []))):
            await _refuse(send, self.status, self.code, problem)
            return
        await self.app(scope, receive, send)


class RequestLimits(HeaderCheck):
    status, code = 431, "headers_too_large"
    problem = staticmethod(header_problem)


LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


def is_loopback_host(host: str) -> bool:
    """An address to listen on that only this machine can reach."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _hostname(value: str) -> str:
    """The name in a Host header or an Origin, without port or brackets' port."""
    host = urlsplit(f"//{value}").hostname if "://" not in value else urlsplit(value).hostname
    return (host or "").lower()


def loopback_problem(headers: list[tuple[bytes, bytes]]) -> str | None:
    values = {name.lower(): value.decode("latin-1") for name, value in headers}
    host = _hostname(values.get(b"host", ""))
    if host not in LOOPBACK_NAMES:
        return f"dev mode answers only requests for this machine, not for host {host or '(none)'!r}"
    origin = values.get(b"origin")
    if origin is not None and _hostname(origin) not in LOOPBACK_NAMES:
        return f"dev mode refuses cross-site requests from {origin[:100]!r}; configure API keys to serve other sites"
    return None


class LoopbackOnly(HeaderCheck):
    status, code = 403, "forbidden"
    problem = staticmethod(loopback_problem)


# --- per API key: a request rate and a number of concurrent answer streams ---

STREAM_ROUTES = ("/knowledge-chat", "/chat", "/continue-stream", "/events")  # answers, and a job's progress events


def api_key_of(scope: Scope) -> str | None:
    """The digest of the key the request presents (the route itself checks it); a key in the URL
    counts only where the route takes it, so the limiter and the route agree on whose request it is."""
    allow_query = accepts_query_key(scope.get("method", ""), scope["path"])
    key = presented_key(Headers(scope=scope), QueryParams(scope.get("query_string", b"")), allow_query=allow_query)
    return key_digest(key) if key else None


class KeyLimits:
    """429 with Retry-After once a key exceeds its rate or its concurrent answer streams.

    Keyless requests pass (they get 401 from the route); in shared mode the replicas count together
    (service/key_limits.py).
    """

    def __init__(self, app: ASGIApp, limiter: Limiter) -> None:
        self.app = app
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = api_key_of(scope) if scope["type"] == "http" else None
        if key is None:
            await self.app(scope, receive, send)
            return
        wait = await self.limiter.retry_after(key)
        if wait is not None:
            await _refuse(send, 429, "rate_limited", f"too many requests for this API key; retry in {math.ceil(wait)} s",
                          headers=[(b"retry-after", str(math.ceil(wait)).encode())])
            return
        if not scope["path"].endswith(STREAM_ROUTES):
            await self.app(scope, receive, send)
            return
        lease = await self.limiter.open_stream(key)
        if lease is None:
            await _refuse(send, 429, "too_many_streams",
                          f"this API key already has {self.limiter.max_streams} open streams (answers, job events); wait for one to end",
                          headers=[(b"retry-after", b"1")])
            return
        closed = False

        async def close() -> None:
            nonlocal closed
            if not closed:
                closed = True
                await self.limiter.close_stream(key, lease)

        async def send_then_free(message: Message) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                await close()  # free before the client can see the end: it may ask again at once
            await send(message)

        try:
            await self.app(scope, receive, send_then_free)
        finally:
            await close()


class RequestIds:
    """Every request gets an id (the client's X-Request-ID, else a new one), echoed in the response
    and carried by every log record made while it is served."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = Headers(scope=scope).get("x-request-id", "")
        request_id = given if 0 < len(given) <= 128 and given.isprintable() else uuid.uuid4().hex

        async def tagged(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (b"x-request-id", request_id.encode())]}
            await send(message)

        with log_ids(request_id=request_id):
            await self.app(scope, receive, tagged)
