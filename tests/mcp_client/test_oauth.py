"""MCP OAuth against a real OAuth-protected MCP server (the official SDK's server and auth server
provider, tests/mcp_oauth_server.py): a user without a token gets the link to open and nothing else;
the browser's return with the code gives that user (and only that user) a token the server accepts.
The browser is played by following the authorization server's redirect by hand."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from ragline.mcp_client.client import McpClient
from ragline.mcp_client.credentials import MemoryCredentialStore, SqliteCredentialStore
from ragline.mcp_client.oauth import AuthorizationRequired, McpUser, OAuthCallbackError, OAuthFlows
from ragline.settings import McpServer
from tests.mcp_oauth_server import served_with_oauth

REDIRECT = "http://127.0.0.1:9/api/v1/mcp/oauth/callback"  # never reached: the test reads the redirect itself
ALICE, BOB = McpUser("acme", "alice-id"), McpUser("acme", "bob-id")


@pytest.fixture(scope="module")
def crm() -> Iterator[McpServer]:
    with served_with_oauth() as server:
        yield server


@pytest.fixture(params=["memory", "sqlite"])
def flows(request, tmp_path) -> OAuthFlows:
    store = MemoryCredentialStore() if request.param == "memory" else SqliteCredentialStore(tmp_path / "mcp_oauth.sqlite")
    return OAuthFlows(store, REDIRECT)


async def authorization_of(client: McpClient, user: McpUser) -> AuthorizationRequired:
    with pytest.raises(AuthorizationRequired) as raised:
        await client.tools("crm", user)
    return raised.value


async def browse(url: str) -> dict[str, str]:
    """The user opens the link and allows: the query the browser brings back to Ragline."""
    async with httpx.AsyncClient() as browser:
        response = await browser.get(url)
    assert response.status_code in (302, 307), response.text
    location = response.headers["location"]
    assert location.startswith(REDIRECT + "?")
    return {key: values[0] for key, values in parse_qs(urlsplit(location).query).items()}


async def test_a_user_without_a_token_gets_the_link_and_after_allowing_the_server_answers_with_their_token(crm, flows):
    client = McpClient({"crm": crm}, oauth=flows)
    needed = await authorization_of(client, ALICE)
    link = parse_qs(urlsplit(needed.url).query)
    assert needed.server == "crm" and link["redirect_uri"] == [REDIRECT] and link["code_challenge_method"] == ["S256"]
    assert await flows.outcome("crm", ALICE) is None

    back = await browse(needed.url)
    assert back["state"] == link["state"][0]  # Ragline's own state, the key of what finishing takes
    assert await flows.finish(back["state"], back["code"]) == ("crm", ALICE)
    assert await flows.outcome("crm", ALICE) == (True, "")

    assert [tool.qualified_name for tool in await client.tools("crm", ALICE)] == ["crm__my_accounts"]
    result = await client.call("crm", "my_accounts", {}, ALICE)
    assert (result.text, result.is_error) == ("alice owns the accounts Fjord Ltd and Harbour AB.", False)
    await authorization_of(client, BOB)  # another user of the tenant has no token of alice's


async def test_an_authorization_finishes_once_and_an_unknown_one_not_at_all(crm, flows):
    needed = await authorization_of(McpClient({"crm": crm}, oauth=flows), ALICE)
    back = await browse(needed.url)
    with pytest.raises(OAuthCallbackError, match="unknown or has expired"):
        await flows.finish("forged-state", back["code"])
    await flows.finish(back["state"], back["code"])
    with pytest.raises(OAuthCallbackError, match="unknown or has expired"):
        await flows.finish(back["state"], back["code"])


async def test_a_refusal_is_the_outcome_the_turn_sees_and_a_new_request_clears_it(crm, flows):
    client = McpClient({"crm": crm}, oauth=flows)
    needed = await authorization_of(client, ALICE)
    state = parse_qs(urlsplit(needed.url).query)["state"][0]
    with pytest.raises(OAuthCallbackError, match="refused"):
        await flows.finish(state, "", error="access_denied")
    assert await flows.outcome("crm", ALICE) == (False, "the authorization was refused (access_denied)")
    await authorization_of(client, ALICE)
    assert await flows.outcome("crm", ALICE) is None


async def test_a_code_the_authorization_server_does_not_know_is_refused_clearly(crm, flows):
    needed = await authorization_of(McpClient({"crm": crm}, oauth=flows), ALICE)
    state = parse_qs(urlsplit(needed.url).query)["state"][0]
    with pytest.raises(OAuthCallbackError, match=r"refused the code \(HTTP 400\)"):
        await flows.finish(state, "made-up-code")
    assert not await flows.authorized("crm", ALICE)


async def test_an_expired_token_is_refreshed_without_asking_the_user_again(crm, flows):
    client = McpClient({"crm": crm}, oauth=flows)
    back = await browse((await authorization_of(client, ALICE)).url)
    await flows.finish(back["state"], back["code"])
    key = "tokens:crm:acme:alice-id"
    record = json.loads(await flows.store.get(key) or "{}")
    first = record["token"]["access_token"]
    await flows.store.put(key, json.dumps({**record, "expires_at": time.time() - 1}))  # an hour later

    result = await client.call("crm", "my_accounts", {}, ALICE)
    assert (result.text, result.is_error) == ("alice owns the accounts Fjord Ltd and Harbour AB.", False)
    renewed = json.loads(await flows.store.get(key) or "{}")
    assert renewed["token"]["access_token"] != first and renewed["expires_at"] > time.time() + 3000
