"""MCP OAuth in agent mode through the HTTP API (issue 28; the seed's mcp_oauth_required /
mcp_oauth_resolved): an assistant names an MCP server that needs each user's authorization (the
official SDK's OAuth server, tests/mcp_oauth_server.py). The user's turn pauses with the link to
open before the model is asked; the browser's return to Ragline's public callback gives the user a
token, the turn goes on, and the model is offered and calls the server's tool. A refusal lets the
turn go on without the server's tools. Each user authorizes for themselves."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tests.agent_script import tool_messages
from tests.api.live import ThreadServer, answer_of, frames, memory_settings, new_session, serve_embedded
from tests.mcp_oauth_server import served_with_oauth
from tests.redis_server import free_port
from tests.scripted_model import Reply, ScriptedCall

V1 = "/api/v1"
KEYS = {"key-alice": "acme/alice", "key-bob": "acme/bob", "key-carol": "acme/carol", "key-dave": "acme/dave"}


@pytest.fixture(scope="module")
def server(tmp_path_factory, scripted_server) -> Iterator[ThreadServer]:
    root, port = tmp_path_factory.mktemp("agent-oauth"), free_port()
    with served_with_oauth() as crm:
        settings = memory_settings(scripted_server, api_keys=KEYS, data_dir=root, agent_mcp_servers={"crm": crm},
                                   public_url=f"http://127.0.0.1:{port}", agent_approval_timeout_s=60)
        live = serve_embedded(root, settings, port)
        yield live
        live.stop()


@pytest.fixture
async def client_of(server, scripted_model) -> AsyncIterator[Any]:
    clients: list[httpx.AsyncClient] = []

    def make(key: str) -> httpx.AsyncClient:
        clients.append(httpx.AsyncClient(base_url=server.url, timeout=60, headers={"X-API-Key": key}))
        return clients[-1]

    yield make
    for client in clients:
        await client.aclose()


async def ask(client: httpx.AsyncClient, question: str, on_link: Any) -> list[Any]:
    """The turn's frames; `on_link(url)` plays the user's browser when the turn asks for authorization."""
    created = await client.post(f"{V1}/assistants", json={"name": "CRM desk", "mode": "agent", "tools": ["search_knowledge"], "mcp_servers": ["crm"]})
    assert created.status_code == 201, created.text
    sid = await new_session(client, title="t")
    got: list[Any] = []
    body = {"query": question, "assistant_id": created.json()["id"]}
    async with client.stream("POST", f"{V1}/sessions/{sid}/knowledge-chat", json=body) as response:
        async for frame in frames(response):
            got.append(frame)
            if frame.type == "mcp_oauth_required":
                await on_link(frame.event["data"]["authorization_url"])
    return got


async def allow(url: str) -> None:
    """The user opens the link and allows: the authorization server sends the browser back to Ragline."""
    async with httpx.AsyncClient(follow_redirects=True) as browser:
        page = await browser.get(url)
    assert page.status_code == 200 and "Ragline may now use crm for you" in page.text, page.text


def scripted_accounts(scripted_model: Any) -> None:
    scripted_model.on(lambda b: "tools" in b and not tool_messages(b), Reply.calling(ScriptedCall("crm__my_accounts", {}, id="a1")))
    scripted_model.on(lambda b: "tools" in b and len(tool_messages(b)) == 1, Reply.text("You own Fjord Ltd and Harbour AB."))


def of_type(got: list[Any], kind: str) -> list[dict[str, Any]]:
    return [f.event["data"] for f in got if f.type == kind]


async def test_a_turn_waits_for_the_users_authorization_then_calls_the_servers_tool_with_their_token(server, client_of, scripted_model):
    scripted_accounts(scripted_model)
    alice = client_of("key-alice")
    got = await ask(alice, "Which accounts are mine?", allow)

    [required] = of_type(got, "mcp_oauth_required")
    assert required["server"] == "crm" and parse_qs(urlsplit(required["authorization_url"]).query)["redirect_uri"] == [
        f"{server.url}/api/v1/mcp/oauth/callback"]
    assert of_type(got, "mcp_oauth_resolved") == [{"server": "crm", "authorized": True, "reason": ""}]
    kinds = [f.type for f in got]
    assert kinds.index("mcp_oauth_resolved") < kinds.index("tool_call")
    offered = [t["function"]["name"] for t in scripted_model.requests[0]["tools"]]
    assert offered == ["search_knowledge", "crm__my_accounts"]  # the model was asked only once the tools were there
    [result] = of_type(got, "tool_result")
    assert result["success"] is True and "alice owns the accounts" in result["output"]
    assert answer_of(got) == "You own Fjord Ltd and Harbour AB." and got[-1].type == "complete"

    scripted_model.requests.clear()
    again = await ask(alice, "And now?", allow)  # the token is kept: no second authorization
    assert not of_type(again, "mcp_oauth_required") and of_type(again, "tool_result")[0]["success"] is True


async def test_a_refused_authorization_lets_the_turn_go_on_without_the_servers_tools(client_of, scripted_model):
    scripted_model.on(lambda b: True, Reply.text("I cannot see your accounts without access to the CRM."))

    async def refuse(url: str) -> None:
        state = parse_qs(urlsplit(url).query)["state"][0]
        async with httpx.AsyncClient() as browser:
            page = await browser.get(f"{parse_qs(urlsplit(url).query)['redirect_uri'][0]}?state={state}&error=access_denied")
        assert page.status_code == 400 and "refused (access_denied)" in page.text

    got = await ask(client_of("key-bob"), "Which accounts are mine?", refuse)
    assert of_type(got, "mcp_oauth_resolved") == [{"server": "crm", "authorized": False, "reason": "the authorization was refused (access_denied)"}]
    assert [t["function"]["name"] for t in scripted_model.requests[0]["tools"]] == ["search_knowledge"]
    assert answer_of(got) == "I cannot see your accounts without access to the CRM." and got[-1].type == "complete"


async def test_the_callback_refuses_an_unknown_authorization_without_a_key(server):
    async with httpx.AsyncClient(base_url=server.url) as browser:
        page = await browser.get(f"{V1}/mcp/oauth/callback", params={"state": "forged", "code": "x"})
        long = await browser.get(f"{V1}/mcp/oauth/callback", params={"state": "s" * 500})
    assert page.status_code == 400 and "unknown or has expired" in page.text
    assert long.status_code == 400 and "too long" in long.text


async def test_the_openai_door_refuses_with_the_link_until_the_user_has_allowed_then_answers(server, client_of, scripted_model):
    """The official openai SDK cannot show a link mid-answer: the door refuses with it (400), and once
    the user has allowed, the same completion runs the agent with the server's tool."""
    import openai
    from openai import AsyncOpenAI

    scripted_accounts(scripted_model)
    carol = client_of("key-carol")
    made = await carol.post(f"{V1}/assistants", json={"name": "CRM desk", "mode": "agent", "tools": ["search_knowledge"], "mcp_servers": ["crm"]})
    model, question = f"assistant:{made.json()['id']}", [{"role": "user", "content": "Which accounts are mine?"}]
    async with AsyncOpenAI(base_url=f"{server.url}/v1", api_key="key-carol", max_retries=0, timeout=60) as sdk:
        with pytest.raises(openai.BadRequestError) as refused:
            await sdk.chat.completions.create(model=model, messages=question)
        message = str(refused.value)
        assert "uses the MCP server crm, which needs your authorization first" in message and scripted_model.requests == []
        await allow(message.split("open ", 1)[1].split(" and allow", 1)[0])
        done = await sdk.chat.completions.create(model=model, messages=question)
    assert done.choices[0].message.content.startswith("You own Fjord Ltd and Harbour AB.")
    assert [t["function"]["name"] for t in scripted_model.requests[0]["tools"]] == ["search_knowledge", "crm__my_accounts"]


async def test_the_mcp_door_refuses_with_the_link_too(server, client_of, scripted_model):
    from tests.api.test_assistant_doors import mcp_client

    dave = client_of("key-dave")
    made = (await dave.post(f"{V1}/assistants", json={"name": "CRM desk", "mode": "agent", "mcp_servers": ["crm"]})).json()
    async with mcp_client(server, "key-dave") as session:
        refused = await session.call_tool("ask", {"question": "Which accounts are mine?", "assistant_id": made["id"]})
    assert refused.is_error and "uses the MCP server crm, which needs your authorization first, and MCP cannot ask for it: open http" in refused.content[0].text
    assert scripted_model.requests == []
