"""API keys -> tenants (and a user within the tenant).

Keys come from settings: `RAGLINE_API_KEYS` (JSON object) and/or `RAGLINE_API_KEYS_FILE` (a JSON
file of the same shape). A value is "tenant" or "tenant/user" (without a user the key's tenant
is also its user), or an object (KeySpec): a tenant, a user and groups, the knowledge bases it is
limited to, read-only, an expiry, a name for the audit log, or `assert_user` for a trusted front
end that names the user per request (X-Ragline-User, X-Ragline-Groups). Every use of a key is one
line on the `ragline.audit` logger. A client sends its key as `X-API-Key: <key>` or `Authorization: Bearer <key>`
(the two event-stream GETs, QUERY_KEY_ROUTES, also take `?api_key=`, since a browser EventSource
cannot set headers; no other route reads a key from its URL).

Dev mode: when no key is configured, every request acts as tenant "default", user "default".
`ragline serve` refuses to listen beyond loopback in dev mode unless told --insecure-dev.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from starlette.requests import Request

from ragline.api.errors import Unauthorized
from ragline.contracts.access import audit
from ragline.service.access import Principal
from ragline.settings import Settings

DEV_PRINCIPAL = Principal("default", "default")
USER_HEADER = "x-ragline-user"  # a trusted front end's key names the user it acts for
GROUPS_HEADER = "x-ragline-groups"  # and the user's groups, comma-separated
_NAME_CHARS = 200


def key_digest(key: str) -> str:
    """Keys are kept and looked up only as their SHA-256 digests, never in clear."""
    return hashlib.sha256(key.encode()).hexdigest()


# Only these GET routes read a key from the query: the answer and job-progress streams a browser
# follows with an EventSource. The name is the decoded one (`api%5Fkey` is `api_key`, as Starlette
# reads every parameter), and the access log judges names decoded too (ragline/logs.py).
QUERY_KEY_ROUTES = ("/continue-stream", "/events")
QUERY_KEY_PREFIXES = ("/api/v1/sessions/continue-stream/",)  # the seed's continue-stream path ends with the session id
QUERY_KEY = "api_key"


def accepts_query_key(method: str, path: str) -> bool:
    """Whether a request may present its key as `?api_key=` (one rule for the routes and the limiter)."""
    return method == "GET" and (path.endswith(QUERY_KEY_ROUTES) or path.startswith(QUERY_KEY_PREFIXES))


def presented_key(headers: Mapping[str, str], query: Mapping[str, str], *, allow_query: bool) -> str | None:
    """The key a client sent: X-API-Key, or Authorization: Bearer, or (QUERY_KEY_ROUTES) ?api_key=."""
    key = headers.get("x-api-key")
    if not key:
        scheme, _, token = headers.get("authorization", "").partition(" ")
        key = token.strip() if scheme.lower() == "bearer" else None
    if not key and allow_query:
        key = query.get(QUERY_KEY)
    return key or None


class KeySpec(BaseModel):
    """One key's entry when it is an object: who it acts for and what it may do."""

    model_config = ConfigDict(extra="forbid")

    tenant: str = Field(min_length=1, max_length=_NAME_CHARS)
    user: str = Field("", max_length=_NAME_CHARS, description="The user it acts for (default: the tenant's name).")
    groups: list[str] = Field(default_factory=list, max_length=100)
    knowledge_bases: list[str] | None = Field(None, max_length=1000, description="Ids of the only bases it reaches; others are 'not found'.")
    read_only: bool = Field(False, description="It may search and ask, never change knowledge.")
    expires_at: datetime | None = Field(None, description="Refused from then on (ISO 8601, with a zone).")
    name: str = Field("", max_length=_NAME_CHARS, description="What the audit log calls it (never the key).")
    assert_user: bool = Field(False, description=f"A trusted front end: it names the user in {USER_HEADER} and groups in {GROUPS_HEADER}.")

    @field_validator("expires_at")
    @classmethod
    def _zoned(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("expires_at needs a time zone (e.g. 2027-01-01T00:00:00Z)")
        return value


@dataclass(frozen=True)
class Key:
    """A configured key: the principal it maps to, and when and how it may be used."""

    principal: Principal
    expires_at: datetime | None = None
    assert_user: bool = False

    def principal_for(self, headers: Mapping[str, str], now: datetime) -> Principal:
        """Who a request with this key acts for; Unauthorized when the key expired or an assertion is bad."""
        if self.expires_at is not None and now >= self.expires_at:
            raise Unauthorized(f"this API key expired at {self.expires_at.isoformat()}")
        if not self.assert_user or not headers.get(USER_HEADER):
            return self.principal
        user = headers.get(USER_HEADER, "").strip()
        groups = [g.strip() for g in headers.get(GROUPS_HEADER, "").split(",") if g.strip()]
        if len(user) > _NAME_CHARS or len(groups) > 100 or any(len(g) > _NAME_CHARS for g in groups):
            raise Unauthorized(f"{USER_HEADER} or {GROUPS_HEADER} is too long")
        return replace(self.principal, user_id=user, groups=frozenset(groups))


def principal_of(value: str | dict[str, Any]) -> Principal:
    return key_of(value).principal


def key_of(value: str | dict[str, Any]) -> Key:
    """A key's entry: "tenant", "tenant/user", or a KeySpec object."""
    if isinstance(value, str):
        tenant, _, user = value.strip().partition("/")
        if not tenant:
            raise ValueError(f"an API key maps to an empty tenant: {value!r}")
        return Key(Principal(tenant, user or tenant))
    spec = KeySpec.model_validate(value)
    principal = Principal(spec.tenant, spec.user or spec.tenant, frozenset(spec.groups),
                          frozenset(spec.knowledge_bases) if spec.knowledge_bases is not None else None,
                          spec.read_only, spec.name)
    return Key(principal, spec.expires_at, spec.assert_user)


def door_of(path: str) -> str:
    """Which door a request came in by, for the audit log."""
    if path.startswith("/v1/"):
        return "openai"
    if path.startswith("/mcp"):
        return "mcp"
    if path.startswith("/retrieval"):
        return "dify"
    return "rest"


@dataclass(frozen=True)
class KeyRing:
    by_digest: dict[str, Key]

    @classmethod
    def from_settings(cls, settings: Settings) -> KeyRing:
        raw: dict[str, Any] = {}
        if settings.api_keys_file is not None:
            loaded = json.loads(settings.api_keys_file.read_text(encoding="utf-8"))
            if not isinstance(loaded, dict):
                raise ValueError(f"{settings.api_keys_file}: expected a JSON object of key -> tenant")
            raw.update({str(k): v for k, v in loaded.items()})
        raw.update(settings.api_keys or {})
        keys: dict[str, Key] = {}
        for key, value in raw.items():
            if not key:
                continue
            if not isinstance(value, (str, dict)):
                raise ValueError("an API key maps to a tenant, 'tenant/user', or an object with a tenant")
            keys[key_digest(key)] = key_of(value)
        return cls(keys)

    @property
    def dev_mode(self) -> bool:
        return not self.by_digest

    def tenants(self) -> list[str]:
        return sorted({entry.principal.tenant_id for entry in self.by_digest.values()})

    def authenticate(self, request: Request) -> Principal:
        if self.dev_mode:
            return DEV_PRINCIPAL
        allow_query = accepts_query_key(request.method, request.scope["path"])
        key = presented_key(request.headers, request.query_params, allow_query=allow_query)
        missing = "an API key is required (X-API-Key header or Authorization: Bearer)"
        if QUERY_KEY in request.query_params and not allow_query:  # say why the key in the URL did not count
            missing += "; only the event streams (continue-stream, job events) take ?api_key="
        who = self.principal_of(key, missing=missing, headers=request.headers)
        audit(who, door_of(request.scope["path"]), f"{request.method} {request.scope['path']}")
        return who

    def knows(self, key: str) -> bool:
        """Whether `key` is one of the configured API keys (expired ones included)."""
        return key_digest(key) in self.by_digest

    def principal_of(self, key: str | None, *, missing: str, headers: Mapping[str, str] | None = None) -> Principal:
        """Who a key acts for (every door asks here); `missing` says how to give one."""
        if self.dev_mode:
            return DEV_PRINCIPAL
        if not key:
            raise Unauthorized(missing)
        entry = self.by_digest.get(key_digest(key))
        if entry is None:
            raise Unauthorized("unknown API key")
        return entry.principal_for(headers or {}, datetime.now(UTC))
