"""Assistants through the other doors (issue 28): the OpenAI-compatible API with the official
`openai` SDK (`model="assistant:<id>"`, listed in /v1/models) and MCP's ask tool with the `mcp`
SDK (`assistant_id`). The assistant's configuration reaches the model, its rules hold, another
tenant's assistant is not there, and the answer records the version it ran with."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import openai
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from openai import AsyncOpenAI

from ragline.api.app import create_app
from tests.api.live import ThreadServer, memory_settings
from tests.scripted_model import Reply, system_text

KEYS = {"key-a": "acme", "key-b": "globex"}
V1 = "/api/v1"
BOB = "You are Bob, the support desk."


@pytest.fixture(scope="module")
def server(scripted_server) -> Iterator[ThreadServer]:
    live = ThreadServer(create_app(memory_settings(scripted_server, api_keys=KEYS))).start()
    yield live
    live.stop()


@pytest.fixture
async def rest(server, scripted_model) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=30, headers={"X-API-Key": "key-a"}) as client:
        yield client


@pytest.fixture
async def bob(rest, scripted_model) -> dict[str, Any]:
    """acme's assistant Bob: its own prompt and answer length; a turn may set only its language."""
    scripted_model.on(lambda body: BOB in system_text(body), Reply.text("I am Bob."))
    made = await rest.post(f"{V1}/assistants", json={"name": "Bob", "overridable": ["language"],
                                                      "config": {"summary": {"prompt": BOB, "max_tokens": 42}, "rewrite_enabled": False}})
    assert made.status_code == 201, made.text
    return made.json()


def openai_client(server: ThreadServer, key: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{server.url}/v1", api_key=key, max_retries=0, timeout=60)


async def recorded(rest: httpx.AsyncClient, session_id: str) -> list[tuple[Any, Any]]:
    items = (await rest.get(f"{V1}/sessions/{session_id}/messages")).json()["items"]
    return [(m["assistant_id"], m["assistant_version"]) for m in items if m["role"] == "assistant"]


# --- the OpenAI-compatible door ---


async def test_v1_models_lists_the_tenants_assistants_and_only_theirs(server, bob):
    model = f"assistant:{bob['id']}"
    async with openai_client(server, "key-a") as acme, openai_client(server, "key-b") as globex:
        cards = {card.id: card for card in (await acme.models.list()).data}
        assert cards[model].model_extra["name"] == "Bob" and cards[model].owned_by == "acme"
        assert (await acme.models.retrieve(model)).model_extra["assistant_version"] == 1
        assert model not in [card.id for card in (await globex.models.list()).data]
        with pytest.raises(openai.NotFoundError):
            await globex.models.retrieve(model)


async def test_a_completion_with_an_assistant_model_runs_with_its_configuration(server, bob, rest, scripted_model):
    async with openai_client(server, "key-a") as acme:
        done = await acme.chat.completions.create(model=f"assistant:{bob['id']}", messages=[{"role": "user", "content": "Who are you?"}],
                                                  temperature=0.9, max_tokens=500)  # sent unasked by many clients: Bob's own win
        assert done.choices[0].message.content == "I am Bob." and done.model == f"assistant:{bob['id']}"
        assert scripted_model.requests[-1]["max_tokens"] == 42
        await rest.patch(f"{V1}/assistants/{bob['id']}", json={"config": {"summary": {"prompt": BOB, "max_tokens": 7}}})
        stream = await acme.chat.completions.create(model=f"assistant:{bob['id']}", stream=True,
                                                    messages=[{"role": "user", "content": "Who are you?"}])
        assert "".join([c.choices[0].delta.content or "" async for c in stream if c.choices]) == "I am Bob."
        assert scripted_model.requests[-1]["max_tokens"] == 7
    assert await recorded(rest, done.model_extra["ragline"]["session_id"]) == [(bob["id"], 1)]


async def test_the_openai_door_refuses_what_the_assistant_does_not_allow_and_unknown_assistants(server, bob, rest):
    question = [{"role": "user", "content": "Who are you?"}]
    async with openai_client(server, "key-a") as acme, openai_client(server, "key-b") as globex:
        with pytest.raises(openai.BadRequestError, match="rerank_top_k is set by assistant 'Bob'"):
            await acme.chat.completions.create(model=f"assistant:{bob['id']}", messages=question,
                                               extra_body={"ragline": {"request": {"rerank_top_k": 9}}})
        for client, model in ((acme, "assistant:no-such-id"), (globex, f"assistant:{bob['id']}"), (acme, "assistant:")):
            with pytest.raises(openai.NotFoundError, match="does not exist"):
                await client.chat.completions.create(model=model, messages=question)



async def test_the_openai_door_runs_an_agent_mode_assistant_on_agent_modes_graph(server, rest, scripted_model):
    agent = (await rest.post(f"{V1}/assistants", json={"name": "Researcher", "mode": "agent", "tools": ["search_knowledge"]})).json()
    scripted_model.on(lambda b: "tools" in b, Reply.text("Answered by the agent."))
    async with openai_client(server, "key-a") as acme:
        done = await acme.chat.completions.create(model=f"assistant:{agent['id']}", messages=[{"role": "user", "content": "Who are you?"}])
    assert done.choices[0].message.content == "Answered by the agent."
    assert [t["function"]["name"] for t in scripted_model.requests[-1]["tools"]] == ["search_knowledge"]  # the assistant's tools
    assert await recorded(rest, done.model_extra["ragline"]["session_id"]) == [(agent["id"], 1)]


# --- MCP ---


@asynccontextmanager
async def mcp_client(server: ThreadServer, key: str) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(30, read=120)) as http,
        streamable_http_client(f"{server.url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def test_mcps_ask_answers_with_an_assistant_and_keeps_its_rules(server, bob, rest, scripted_model):
    async with mcp_client(server, "key-a") as acme, mcp_client(server, "key-b") as globex:
        tools = {tool.name: tool for tool in (await acme.list_tools()).tools}
        assert "assistant_id" in tools["ask"].input_schema["properties"]
        answered = await acme.call_tool("ask", {"question": "Who are you?", "assistant_id": bob["id"]})
        assert not answered.is_error and answered.structured_content["answer"] == "I am Bob."
        assert scripted_model.requests[-1]["max_tokens"] == 42
        overriding = await acme.call_tool("ask", {"question": "Who are you?", "assistant_id": bob["id"], "model": "openai/scripted"})
        assert overriding.is_error and "chat_model is set by assistant 'Bob'" in overriding.content[0].text
        theirs = await globex.call_tool("ask", {"question": "Who are you?", "assistant_id": bob["id"]})
        assert theirs.is_error and f"assistant {bob['id']} not found" in theirs.content[0].text
    assert await recorded(rest, answered.structured_content["session_id"]) == [(bob["id"], 1)]


async def test_the_openai_and_mcp_doors_refuse_an_assistant_whose_tool_calls_wait_for_approval(server, rest, scripted_model):
    """Neither door can ask its client to approve a call: the run would only wait, then deny. It is refused up front."""
    careful = (await rest.post(f"{V1}/assistants", json={"name": "Careful", "mode": "agent", "tools": ["search_knowledge"],
                                                         "approval_tools": ["search_knowledge"]})).json()
    question = [{"role": "user", "content": "Who designed the sensor?"}]
    async with openai_client(server, "key-a") as acme:
        with pytest.raises(openai.BadRequestError, match="asks its user to approve each call to search_knowledge"):
            await acme.chat.completions.create(model=f"assistant:{careful['id']}", messages=question)
    async with mcp_client(server, "key-a") as session:
        refused = await session.call_tool("ask", {"question": "Who designed the sensor?", "assistant_id": careful["id"]})
        assert refused.is_error and "which MCP cannot ask" in refused.content[0].text
    assert not scripted_model.requests  # refused before any model call
