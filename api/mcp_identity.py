"""Who calls /mcp with an OAuth access token (MCP OAuth, Ragline as the protected resource).

An MCP client that finds no API key to send reads /.well-known/oauth-protected-resource/mcp
(RFC 9728), signs its user in at the authorization server named there, and calls /mcp with the
access token. Ragline asks the issuer's introspection endpoint (RFC 7662) whether the token is
active: an active token acts for the user in its `sub` (or `username`) claim with the groups of
its groups claim, in the configured tenant, so restricted documents follow the signed-in user as
they follow a key's user. A token meant for another resource (`aud` without this /mcp) is refused.
Answers are kept until the token expires, at most a minute, so a revoked token stops working soon
without every tool call waiting on the issuer.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ragline.api.host import host_of
from ragline.api.openapi import doc
from ragline.contracts.access import Principal
from ragline.settings import Settings

INTROSPECTION_TIMEOUT_S = 5.0
INTROSPECTION_MAX_BYTES = 64 * 1024
KEEP_ANSWER_S = 60.0  # the longest an introspection answer is reused
KEPT_TOKENS = 10_000
_NAME_CHARS, _GROUPS = 200, 100
RESOURCE_METADATA_PATH = "/.well-known/oauth-protected-resource/mcp"


class TokenRefused(Exception):
    """The token is not active, not for this resource, or names no user: a 401."""


class IssuerUnavailable(Exception):
    """The introspection endpoint did not answer usefully: a 503 (the token may well be good)."""


class OAuthIdentity:
    """Access tokens of one authorization server, as principals (MCP OAuth at /mcp)."""

    def __init__(self, settings: Settings) -> None:
        assert settings.mcp_oauth_issuer and settings.mcp_oauth_introspection_url  # Settings checks they come together
        self.issuer = settings.mcp_oauth_issuer
        self.introspection_url = settings.mcp_oauth_introspection_url
        self.auth = (settings.mcp_oauth_client_id, settings.mcp_oauth_client_secret or "") if settings.mcp_oauth_client_id else None
        self.tenant = settings.mcp_oauth_tenant
        self.groups_claim = settings.mcp_oauth_groups_claim
        self._kept: OrderedDict[str, tuple[float, Principal | None]] = OrderedDict()

    @classmethod
    def from_settings(cls, settings: Settings) -> OAuthIdentity | None:
        return cls(settings) if settings.mcp_oauth_issuer else None

    async def principal(self, token: str, resource: str) -> Principal:
        """The principal of an active token for `resource` (raises TokenRefused or IssuerUnavailable)."""
        digest = hashlib.sha256(token.encode()).hexdigest()
        kept = self._kept.get(digest)
        if kept is not None and kept[0] > time.monotonic():
            if kept[1] is None:
                raise TokenRefused("the access token is not active")
            return kept[1]
        claims = await self._introspect(token)
        try:
            who = self._principal_of(claims, resource)
        except TokenRefused:
            self._keep(digest, None, KEEP_ANSWER_S)
            raise
        expires = claims.get("exp")
        left = float(expires) - time.time() if isinstance(expires, (int, float)) else KEEP_ANSWER_S
        self._keep(digest, who, min(left, KEEP_ANSWER_S))
        return who

    def _keep(self, digest: str, who: Principal | None, seconds: float) -> None:
        if seconds <= 0:
            return
        self._kept[digest] = (time.monotonic() + seconds, who)
        self._kept.move_to_end(digest)
        while len(self._kept) > KEPT_TOKENS:
            self._kept.popitem(last=False)

    async def _introspect(self, token: str) -> dict[str, Any]:
        try:
            async with (
                httpx.AsyncClient(timeout=INTROSPECTION_TIMEOUT_S, follow_redirects=False) as client,
                client.stream("POST", self.introspection_url, data={"token": token, "token_type_hint": "access_token"},
                              auth=self.auth, headers={"Accept": "application/json"}) as response,
            ):
                body = b""
                async for piece in response.aiter_bytes():
                    body += piece
                    if len(body) > INTROSPECTION_MAX_BYTES:
                        raise IssuerUnavailable(f"the introspection answer is over {INTROSPECTION_MAX_BYTES} bytes")
        except httpx.HTTPError as exc:
            raise IssuerUnavailable(f"the token introspection endpoint did not answer: {type(exc).__name__}") from exc
        if response.status_code != 200:
            raise IssuerUnavailable(f"the token introspection endpoint answered HTTP {response.status_code}")
        try:
            claims = json.loads(body)
        except ValueError as exc:
            raise IssuerUnavailable("the token introspection endpoint answered no JSON") from exc
        if not isinstance(claims, dict):
            raise IssuerUnavailable("the token introspection endpoint answered no JSON object")
        return claims

    def _principal_of(self, claims: dict[str, Any], resource: str) -> Principal:
        if claims.get("active") is not True:
            raise TokenRefused("the access token is not active")
        audience = claims.get("aud")
        audiences = [audience] if isinstance(audience, str) else audience if isinstance(audience, list) else []
        if audiences and resource.rstrip("/") not in {str(a).rstrip("/") for a in audiences}:
            raise TokenRefused("the access token was issued for another resource")
        user = claims.get("sub") or claims.get("username")
        if not isinstance(user, str) or not user.strip() or len(user) > _NAME_CHARS:
            raise TokenRefused("the access token names no user (sub or username)")
        raw_groups = claims.get(self.groups_claim) or []
        groups = [raw_groups] if isinstance(raw_groups, str) else raw_groups if isinstance(raw_groups, list) else []
        named = frozenset(g.strip() for g in groups[:_GROUPS] if isinstance(g, str) and g.strip() and len(g) <= _NAME_CHARS)
        client = claims.get("client_id")
        return Principal(self.tenant, user.strip(), named, key_name=f"oauth {client}" if isinstance(client, str) else "oauth")


def _public_base(request: Request) -> str:
    """Where clients reach this service: settings.public_url behind a proxy, else the request's own address."""
    return (host_of(request).settings.public_url or str(request.base_url)).rstrip("/")


def resource_url(request: Request) -> str:
    """This service's /mcp as its clients reach it (the resource a token must be for)."""
    return _public_base(request) + "/mcp"


def resource_metadata_url(request: Request) -> str:
    return _public_base(request) + RESOURCE_METADATA_PATH


@doc("Where an MCP client gets an access token for /mcp (RFC 9728; served when MCP OAuth is configured)", "mcp", public=True)
async def resource_metadata(request: Request) -> Response:
    issuer = host_of(request).settings.mcp_oauth_issuer
    return JSONResponse({"resource": resource_url(request), "authorization_servers": [issuer], "bearer_methods_supported": ["header"],
                         "resource_name": "Ragline"})
