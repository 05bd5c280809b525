"""An MCP server that needs OAuth, built with the official SDK (its auth server provider, in
memory): the tests of MCP OAuth run it in a process of its own (`python tests/mcp_oauth_server.py
PORT`) through `served_with_oauth()`. Its authorization endpoint grants at once, as the user "alice"
who clicks Allow would, and sends the browser back to the client's redirect URI with a code; its one
tool says whose token called it, so a test sees the user's own token reach the server. Tokens
come with a refresh token, which works once (rotated). It also serves /introspect (RFC 7662), so it
is the authorization server of Ragline's own /mcp in the MCP OAuth identity tests."""

from __future__ import annotations

import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlencode

from ragline.settings import McpServer

USER = "alice"
GROUPS = ["hr"]  # what its introspection endpoint says of USER


def build_server(port: int) -> Any:
    from mcp.server.auth.middleware.auth_context import get_access_token
    from mcp.server.auth.provider import AccessToken, AuthorizationCode, AuthorizationParams, RefreshToken
    from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
    from mcp.server.mcpserver import MCPServer
    from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

    class GrantAtOnce:
        """An authorization server in memory that grants every request to USER."""

        def __init__(self) -> None:
            self.clients: dict[str, OAuthClientInformationFull] = {}
            self.codes: dict[str, AuthorizationCode] = {}
            self.tokens: dict[str, AccessToken] = {}
            self.refresh_tokens: dict[str, RefreshToken] = {}

        def _issue(self, client_id: str, scopes: list[str], subject: str | None, resource: str | None = None) -> OAuthToken:
            token, refresh = "tok-" + secrets.token_urlsafe(16), "ref-" + secrets.token_urlsafe(16)
            self.tokens[token] = AccessToken(token=token, client_id=client_id, scopes=scopes, subject=subject, resource=resource)
            self.refresh_tokens[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes, subject=subject)
            return OAuthToken(access_token=token, token_type="Bearer", expires_in=3600, refresh_token=refresh)

        async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
            return self.clients.get(client_id)

        async def register_client(self, client_info: OAuthClientInformationFull) -> None:
            self.clients[str(client_info.client_id)] = client_info

        async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
            code = secrets.token_urlsafe(24)
            self.codes[code] = AuthorizationCode(code=code, scopes=params.scopes or [], expires_at=time.time() + 300,
                                                 client_id=str(client.client_id), code_challenge=params.code_challenge,
                                                 redirect_uri=params.redirect_uri, redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
                                                 resource=params.resource, subject=USER)
            return f"{params.redirect_uri}?{urlencode({'code': code, 'state': params.state or ''})}"

        async def load_authorization_code(self, client: OAuthClientInformationFull, authorization_code: str) -> AuthorizationCode | None:
            return self.codes.get(authorization_code)

        async def exchange_authorization_code(self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode) -> OAuthToken:
            self.codes.pop(authorization_code.code, None)
            return self._issue(str(client.client_id), authorization_code.scopes, authorization_code.subject, authorization_code.resource)

        async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
            return self.refresh_tokens.get(refresh_token)

        async def exchange_refresh_token(self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]) -> OAuthToken:
            self.refresh_tokens.pop(refresh_token.token, None)  # rotated: each refresh token works once
            return self._issue(str(client.client_id), scopes or refresh_token.scopes, refresh_token.subject)

        async def load_access_token(self, token: str) -> AccessToken | None:
            return self.tokens.get(token)

        async def revoke_token(self, token: Any) -> None:
            self.tokens.pop(getattr(token, "token", ""), None)

    base = f"http://127.0.0.1:{port}"
    auth = AuthSettings(issuer_url=base, resource_server_url=f"{base}/mcp", validate_token_resource=False,
                        client_registration_options=ClientRegistrationOptions(enabled=True))
    provider = GrantAtOnce()
    server = MCPServer("crm", log_level="WARNING", auth=auth, auth_server_provider=provider)

    @server.custom_route("/introspect", methods=["POST"])
    async def introspect(request: Any) -> Any:
        """RFC 7662, for a resource server that takes this server's tokens (Ragline's /mcp): the
        token's user, the user's groups, and the resource it was issued for."""
        from starlette.responses import JSONResponse

        token = provider.tokens.get(str((await request.form()).get("token", "")))
        if token is None:
            return JSONResponse({"active": False})
        return JSONResponse({"active": True, "sub": token.subject, "client_id": token.client_id, "groups": GROUPS,
                             "exp": int(time.time()) + 3600, **({"aud": token.resource} if token.resource else {})})

    @server.tool()
    def my_accounts() -> str:
        """The accounts of the user who authorized Ragline."""
        token = get_access_token()
        return f"{token.subject if token else 'nobody'} owns the accounts Fjord Ltd and Harbour AB."

    return server


@contextmanager
def served_with_oauth() -> Iterator[McpServer]:
    """The server on a free loopback port, as a settings entry marked oauth."""
    from tests.mcp_orders import _free_port, _wait_for_port  # not at the top: this file also runs as the server's script

    port = _free_port()
    process = subprocess.Popen([sys.executable, __file__, str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_port(process, port)
        yield McpServer(transport="streamable_http", url=f"http://127.0.0.1:{port}/mcp", timeout_s=10, oauth=True)
    finally:
        process.terminate()
        process.wait(10)


if __name__ == "__main__":
    port = int(sys.argv[1])
    build_server(port).run("streamable-http", host="127.0.0.1", port=port, stateless_http=True)
