"""MCP OAuth at Ragline's own /mcp: the official MCP client signs its user in at an authorization
server (a real one, the SDK's, in a process of its own: tests/mcp_oauth_server.py) and calls /mcp
with the access token; Ragline asks the issuer's introspection endpoint who it is, and that user's
groups decide which restricted documents the tools search. The user "alice" is in group hr: she
finds the hr-only Salaries and the open Canteen, never the eng-only Roadmap."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from ragline.api.app import create_app
from ragline.services import Services
from tests.api.jobs import ingested
from tests.api.live import ThreadServer, memory_settings
from tests.mcp_oauth_server import served_with_oauth

V1 = "/api/v1"
TEXTS = {
    "Salaries": ("Salary bands policy: engineers earn between 50 and 90 thousand a year. Codeword ZEPHYRINE.", ["hr"]),
    "Roadmap": ("Roadmap policy: the next release ships the offline mode in March. Codeword QUILLOTINE.", ["eng"]),
    "Canteen": ("Canteen policy: lunch is served from noon to two in the afternoon. Codeword MARZIPANE.", []),
}
QUESTION = "What does the policy say? codeword"


@pytest.fixture(scope="module")
def ragline(embedder, tmp_path_factory) -> Iterator[dict[str, Any]]:
    with served_with_oauth() as issuer_server:
        issuer = (issuer_server.url or "").removesuffix("/mcp")
        root = tmp_path_factory.mktemp("mcp-oauth-identity")
        settings = memory_settings(api_keys={"key-admin": {"tenant": "acme", "user": "admin", "groups": ["hr", "eng"]}}, data_dir=root,
                                   mcp_oauth_issuer=issuer, mcp_oauth_introspection_url=f"{issuer}/introspect", mcp_oauth_tenant="acme")
        services = Services(settings, embedder_factory=lambda: embedder)
        live = ThreadServer(create_app(settings, services=services)).start()

        async def build() -> None:
            async with httpx.AsyncClient(base_url=live.url, timeout=120, headers={"X-API-Key": "key-admin"}) as admin:
                kb = (await admin.post(f"{V1}/knowledge-bases", json={"name": "handbook"})).json()["id"]
                for title, (text, groups) in TEXTS.items():
                    document = await ingested(admin, await admin.post(f"{V1}/knowledge-bases/{kb}/documents/text", json={"title": title, "text": text}))
                    if groups:
                        ruled = await admin.put(f"{V1}/knowledge-bases/{kb}/documents/{document['id']}/access", json={"groups": groups})
                        assert ruled.status_code == 200, ruled.text

        asyncio.run(build())
        try:
            yield {"url": live.url, "issuer": issuer}
        finally:
            live.stop()
            asyncio.run(services.aclose())


class Remembered:
    """The client's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def signed_in_client(ragline_url: str, storage: Remembered) -> OAuthClientProvider:
    """The SDK's OAuth client; the user's browser is an HTTP GET whose redirect carries the code."""
    returned: dict[str, str] = {}

    async def open_browser(authorization_url: str) -> None:
        async with httpx.AsyncClient(follow_redirects=False, timeout=30) as browser:
            answer = await browser.get(authorization_url)
        assert answer.status_code in (302, 307), answer.text
        query = parse_qs(urlparse(answer.headers["location"]).query)
        returned.update(code=query["code"][0], state=query.get("state", [""])[0])

    async def come_back() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=returned["code"], state=returned["state"] or None)

    metadata = OAuthClientMetadata(client_name="an MCP client", redirect_uris=["http://127.0.0.1:9/callback"],
                                   grant_types=["authorization_code", "refresh_token"], response_types=["code"])
    return OAuthClientProvider(f"{ragline_url}/mcp", metadata, storage, redirect_handler=open_browser, callback_handler=come_back)


async def test_an_mcp_client_signed_in_at_the_issuer_reads_as_its_user(ragline, caplog):
    storage = Remembered()
    with caplog.at_level(logging.INFO, logger="ragline.audit"):
        async with (
            httpx2.AsyncClient(auth=signed_in_client(ragline["url"], storage), timeout=httpx2.Timeout(30, read=120)) as http,
            streamable_http_client(f"{ragline['url']}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            found = await session.call_tool("search", {"query": QUESTION, "knowledge_bases": ["handbook"], "top_k": 10})
    assert not found.is_error, found.model_dump()
    shown = json.dumps(found.structured_content)
    assert "ZEPHYRINE" in shown and "MARZIPANE" in shown and "QUILLOTINE" not in shown
    assert storage.tokens is not None and storage.tokens.access_token.startswith("tok-")
    used = [r.audit for r in caplog.records if r.name == "ragline.audit" and r.audit.get("via") == "oauth"]
    assert used and used[-1]["user"] == "alice" and used[-1]["tenant"] == "acme" and used[-1]["door"] == "mcp"
    assert all(storage.tokens.access_token not in json.dumps(line) for line in used)


async def test_without_a_token_mcp_says_where_to_sign_in_and_refuses_a_token_the_issuer_does_not_know(ragline):
    async with httpx.AsyncClient(base_url=ragline["url"], timeout=30) as http:
        refused = await http.post("/mcp", json={})
        assert refused.status_code == 401
        challenge = refused.headers["www-authenticate"]
        assert f'resource_metadata="{ragline["url"]}/.well-known/oauth-protected-resource/mcp"' in challenge
        advertised = (await http.get("/.well-known/oauth-protected-resource/mcp")).json()
        assert advertised["resource"] == f"{ragline['url']}/mcp" and advertised["authorization_servers"] == [ragline["issuer"]]
        forged = await http.post("/mcp", json={}, headers={"Authorization": "Bearer tok-forged"})
        assert forged.status_code == 401 and "not active" in forged.json()["error"]["message"]
        keyed = await http.post("/mcp", json={}, headers={"X-API-Key": "key-admin"})
        assert keyed.status_code != 401  # an API key still works beside OAuth
