"""What every request must pass before any route sees it (pure ASGI middleware).

- `RequestLimits`: too many headers, one header line too long, or all headers together too
  large is a 431. Bodies are bounded where they are read (api/inputs.py, the multipart upload).
- `LoopbackOnly`: in dev mode (no API keys, listening on loopback) only a browser on this machine
  may talk to the service. A foreign Host (DNS rebinding) or a cross-site Origin is a 403, so a
  web page elsewhere cannot drive the keyless API through the user's browser.
"""

from __future__ import annotations

import ipaddress
import json
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from ragline import defaults


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


async def _refuse(send: Send, status: int, code: str, message: str) -> None:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class RequestLimits:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (problem := header_problem(scope.get("headers", []))):
            await _refuse(send, 431, "headers_too_large", problem)
            return
        await self.app(scope, receive, send)


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


class LoopbackOnly:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (problem := loopback_problem(scope.get("headers", []))):
            await _refuse(send, 403, "forbidden", problem)
            return
        await self.app(scope, receive, send)
