"""API keys -> tenants (and a user within the tenant).

Keys come from settings: `RAGLINE_API_KEYS` (JSON object) and/or `RAGLINE_API_KEYS_FILE` (a JSON
file of the same shape). A value is "tenant" or "tenant/user"; without a user the key's tenant
is also its user. A client sends its key as `X-API-Key: <key>` or `Authorization: Bearer <key>`
(the two event-stream GETs, QUERY_KEY_ROUTES, also take `?api_key=`, since a browser EventSource
cannot set headers; no other route reads a key from its URL).

Dev mode: when no key is configured, every request acts as tenant "default", user "default".
`ragline serve` refuses to listen beyond loopback in dev mode unless told --insecure-dev.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass

from starlette.requests import Request

from ragline.api.errors import Unauthorized
from ragline.service.access import Principal
from ragline.settings import Settings

DEV_PRINCIPAL = Principal("default", "default")


def key_digest(key: str) -> str:
    """Keys are kept and looked up only as their SHA-256 digests, never in clear."""
    return hashlib.sha256(key.encode()).hexdigest()


# Only these GET routes read a key from the query: the answer and job-progress streams a browser
# follows with an EventSource. The name is the decoded one (`api%5Fkey` is `api_key`, as Starlette
# reads every parameter), and the access log judges names decoded too (ragline/logs.py).
QUERY_KEY_ROUTES = ("/continue-stream", "/events")
QUERY_KEY = "api_key"


def accepts_query_key(method: str, path: str) -> bool:
    """Whether a request may present its key as `?api_key=` (one rule for the routes and the limiter)."""
    return method == "GET" and path.endswith(QUERY_KEY_ROUTES)


def presented_key(headers: Mapping[str, str], query: Mapping[str, str], *, allow_query: bool) -> str | None:
    """The key a client sent: X-API-Key, or Authorization: Bearer, or (QUERY_KEY_ROUTES) ?api_key=."""
    key = headers.get("x-api-key")
    if not key:
        scheme, _, token = headers.get("authorization", "").partition(" ")
        key = token.strip() if scheme.lower() == "bearer" else None
    if not key and allow_query:
        key = query.get(QUERY_KEY)
    return key or None


def principal_of(value: str) -> Principal:
    tenant, _, user = value.strip().partition("/")
    if not tenant:
        raise ValueError(f"an API key maps to an empty tenant: {value!r}")
    return Principal(tenant, user or tenant)


@dataclass(frozen=True)
class KeyRing:
    by_digest: dict[str, Principal]

    @classmethod
    def from_settings(cls, settings: Settings) -> KeyRing:
        raw: dict[str, str] = {}
        if settings.api_keys_file is not None:
            loaded = json.loads(settings.api_keys_file.read_text(encoding="utf-8"))
            if not isinstance(loaded, dict):
                raise ValueError(f"{settings.api_keys_file}: expected a JSON object of key -> tenant")
            raw.update({str(k): str(v) for k, v in loaded.items()})
        raw.update(settings.api_keys or {})
        return cls({key_digest(key): principal_of(value) for key, value in raw.items() if key})

    @property
    def dev_mode(self) -> bool:
        return not self.by_digest

    def authenticate(self, request: Request) -> Principal:
        if self.dev_mode:
            return DEV_PRINCIPAL
        allow_query = accepts_query_key(request.method, request.scope["path"])
        key = presented_key(request.headers, request.query_params, allow_query=allow_query)
        missing = "an API key is required (X-API-Key header or Authorization: Bearer)"
        if QUERY_KEY in request.query_params and not allow_query:  # say why the key in the URL did not count
            missing += "; only the event streams (continue-stream, job events) take ?api_key="
        return self.principal_of(key, missing=missing)

    def principal_of(self, key: str | None, *, missing: str) -> Principal:
        """The tenant and user a key maps to (every door asks here); `missing` says how to give one."""
        if self.dev_mode:
            return DEV_PRINCIPAL
        if not key:
            raise Unauthorized(missing)
        principal = self.by_digest.get(key_digest(key))
        if principal is None:
            raise Unauthorized("unknown API key")
        return principal
