"""MCP OAuth (the seed's mcp_oauth_required / mcp_oauth_resolved): a server the operator marks
`oauth` is reached with each user's own token, which the user grants in a browser.

The official SDK's `OAuthClientProvider` does the protocol: it finds the server's authorization
server, registers Ragline as a client, attaches and refreshes tokens. Its authorization step would
wait in memory for the browser to come back, which no durable run can do, so Ragline splits it:

1. When the SDK needs the user, `OAuthFlows` keeps what finishing takes (a fresh PKCE verifier,
   the token request the SDK prepared) under the authorization's `state`, for
   AGENT_OAUTH_PENDING_TTL_S, and raises `AuthorizationRequired` with the URL to open. The run
   pauses on it (nodes/agent/authorize.py); nothing waits in memory.
2. The browser comes back to `redirect_url` (api/mcp_oauth.py) on any replica: `finish` exchanges
   the code for the user's tokens and stores them (mcp_client/credentials.py). The paused run sees
   them and goes on.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider, PKCEParameters
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from ragline import defaults
from ragline.mcp_client.credentials import CredentialStore, RedisCredentialStore, SqliteCredentialStore
from ragline.settings import Settings

CALLBACK_PATH = "/api/v1/mcp/oauth/callback"  # where the browser comes back (api/mcp_oauth.py)


@dataclass(frozen=True)
class McpUser:
    """Whose tokens: a user of a tenant (each grants access to their own account on the server)."""

    tenant_id: str
    user_id: str


class AuthorizationRequired(Exception):
    """The server needs the user's authorization: they open `url`, and the turn waits for it."""

    def __init__(self, server: str, url: str) -> None:
        super().__init__(f"MCP server {server!r} needs your authorization: open {url}")
        self.server = server
        self.url = url


class OAuthCallbackError(ValueError):
    """The browser came back with an authorization Ragline cannot finish (unknown, expired, refused)."""


class _QuietPause(logging.Filter):
    """The SDK logs every failure of its flow with a traceback; a pause for the user is none."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], AuthorizationRequired))


logging.getLogger("mcp.client.auth.oauth2").addFilter(_QuietPause())


def _key(kind: str, server: str, user: McpUser | None = None) -> str:
    return f"{kind}:{server}" if user is None else f"{kind}:{server}:{user.tenant_id}:{user.user_id}"


class _StoredTokens:
    """The SDK's TokenStorage over the credential store: one user's tokens for one server (with
    when they expire, so the SDK refreshes them instead of asking the user again), and the
    registration the server gave Ragline (shared by its users)."""

    def __init__(self, store: CredentialStore, server: str, user: McpUser, context: Any = None) -> None:
        self.store, self.server, self.user = store, server, user
        self.context = context  # the provider's OAuthContext, told when a loaded token expires

    async def get_tokens(self) -> OAuthToken | None:
        found = await self.store.get(_key("tokens", self.server, self.user))
        if not found:
            return None
        record = json.loads(found)
        if self.context is not None and record.get("expires_at"):
            self.context.token_expiry_time = record["expires_at"]
        return OAuthToken.model_validate(record["token"])

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires_at = time.time() + tokens.expires_in if tokens.expires_in else None
        record = {"token": tokens.model_dump(mode="json", exclude_none=True), "expires_at": expires_at}
        await self.store.put(_key("tokens", self.server, self.user), json.dumps(record))

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        found = await self.store.get(_key("client", self.server))
        return OAuthClientInformationFull.model_validate_json(found) if found else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        await self.store.put(_key("client", self.server), client_info.model_dump_json())


async def _never_called() -> AuthorizationCodeResult:
    raise RuntimeError("Ragline finishes an authorization at its callback, never inside a request")


def _with_own_pkce(url: str, state: str, pkce: PKCEParameters) -> str:
    """The SDK's authorization URL with Ragline's state and PKCE challenge (whose verifier it keeps)."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query)) | {"state": state, "code_challenge": pkce.code_challenge, "code_challenge_method": "S256"}
    return urlunsplit(parts._replace(query=urlencode(query)))


class OAuthFlows:
    """Authorizations of the servers marked `oauth`, for every user, over one credential store."""

    def __init__(self, store: CredentialStore, redirect_url: str, *, client_name: str = "Ragline") -> None:
        self.store = store
        self.redirect_url = redirect_url
        self.client_name = client_name

    def auth(self, server: str, url: str, user: McpUser, scope: str | None) -> tuple[OAuthClientProvider, Callable[[], Awaitable[None]]]:
        """The httpx auth for a session with `server` as `user`, and a check to call when the
        session failed: it raises AuthorizationRequired when the failure was the pause for the user."""
        metadata = OAuthClientMetadata(client_name=self.client_name, redirect_uris=[self.redirect_url],
                                       grant_types=["authorization_code", "refresh_token"], response_types=["code"],
                                       token_endpoint_auth_method="none", scope=scope)
        storage = _StoredTokens(self.store, server, user)
        provider = OAuthClientProvider(url, metadata, storage, callback_handler=_never_called)
        storage.context = provider.context
        paused: list[AuthorizationRequired] = []

        async def pause(authorization_url: str) -> None:
            paused.append(await self._pending(server, user, provider, authorization_url))
            raise paused[-1]

        async def raise_if_paused() -> None:
            if paused:
                raise paused[-1]

        provider.context.redirect_handler = pause
        return provider, raise_if_paused

    async def _pending(self, server: str, user: McpUser, provider: OAuthClientProvider, url: str) -> AuthorizationRequired:
        """Keep what finishing the authorization takes, under a fresh state; the URL to open."""
        context, pkce, state = provider.context, PKCEParameters.generate(), secrets.token_urlsafe(32)
        token_url = (str(context.oauth_metadata.token_endpoint) if context.oauth_metadata and context.oauth_metadata.token_endpoint
                     else context.get_authorization_base_url(context.server_url).rstrip("/") + "/token")
        form = {"grant_type": "authorization_code", "redirect_uri": self.redirect_url,
                "client_id": context.client_info.client_id if context.client_info else "", "code_verifier": pkce.code_verifier}
        if context.should_include_resource_param(context.protocol_version):
            form["resource"] = context.get_resource_url()
        form, headers = context.prepare_token_auth(form, {"Content-Type": "application/x-www-form-urlencoded"})
        pending = {"server": server, "tenant_id": user.tenant_id, "user_id": user.user_id, "token_url": token_url, "form": form, "headers": headers}
        await self.store.put(f"pending:{state}", json.dumps(pending), ttl_s=defaults.AGENT_OAUTH_PENDING_TTL_S)
        await self.store.delete(_key("refused", server, user))  # an earlier refusal does not answer this request
        return AuthorizationRequired(server, _with_own_pkce(url, state, pkce))

    async def finish(self, state: str, code: str, *, error: str = "") -> tuple[str, McpUser]:
        """Exchange the code the browser brought for the user's tokens, and store them: (server, user).
        A refusal (`error`, e.g. access_denied) is kept for the waiting turn. OAuthCallbackError when
        the state is unknown or expired, the user refused, or the server refuses the code."""
        found = await self.store.take(f"pending:{state}") if state else None
        if found is None:
            raise OAuthCallbackError("this authorization is unknown or has expired: ask the question again to get a new link")
        pending: dict[str, Any] = json.loads(found)
        user = McpUser(pending["tenant_id"], pending["user_id"])
        if error or not code:
            reason = f"the authorization was refused ({error or 'no code'})"
            await self.store.put(_key("refused", pending["server"], user), reason[:200], ttl_s=defaults.AGENT_OAUTH_PENDING_TTL_S)
            raise OAuthCallbackError(reason)
        try:
            async with httpx.AsyncClient(timeout=defaults.AGENT_MCP_TIMEOUT_S) as client:
                response = await client.post(pending["token_url"], data={**pending["form"], "code": code}, headers=pending["headers"])
        except httpx.HTTPError as exc:
            raise OAuthCallbackError(f"the authorization server of {pending['server']!r} could not be reached: {type(exc).__name__}") from None
        if response.status_code != 200:
            raise OAuthCallbackError(f"the authorization server of {pending['server']!r} refused the code (HTTP {response.status_code})")
        try:
            tokens = OAuthToken.model_validate_json(response.content)
        except ValueError:
            raise OAuthCallbackError(f"the authorization server of {pending['server']!r} sent no usable token") from None
        await _StoredTokens(self.store, pending["server"], user).set_tokens(tokens)
        return pending["server"], user

    async def authorized(self, server: str, user: McpUser) -> bool:
        """Whether the user holds tokens for the server (granted, and not given up since)."""
        return await self.store.get(_key("tokens", server, user)) is not None

    async def outcome(self, server: str, user: McpUser) -> tuple[bool, str] | None:
        """(True, "") once the user granted access, (False, why) once they refused; None while it waits."""
        if await self.authorized(server, user):
            return True, ""
        refused = await self.store.get(_key("refused", server, user))
        return None if refused is None else (False, refused)

    async def forget(self, server: str, user: McpUser) -> None:
        """Drop the user's tokens for the server: the next use asks for authorization again."""
        await self.store.delete(_key("tokens", server, user))


def open_oauth_flows(settings: Settings, redis_async: Callable[[str], Any]) -> OAuthFlows | None:
    """The flows of the servers marked `oauth` (None when none is): tokens in Redis with redis_url
    (the browser may come back to any replica), else data_dir/service/mcp_oauth.sqlite; the
    browser comes back to settings.public_url (default http://host:port)."""
    if not any(server.oauth for server in settings.agent_mcp_servers.values()):
        return None
    store: CredentialStore = (RedisCredentialStore(redis_async("mcp-oauth")) if settings.redis_url
                              else SqliteCredentialStore(settings.data_dir / "service" / "mcp_oauth.sqlite"))
    public = (settings.public_url or f"http://{settings.host}:{settings.port}").rstrip("/")
    return OAuthFlows(store, f"{public}{CALLBACK_PATH}")
