"""MCP servers as tool sources of agent mode (issue 28), through the HTTP API: an MCP server built
with the official SDK (tests/mcp_orders.py) on loopback, named by an assistant from the operator's
allow list (settings agent_mcp_servers); the scripted tool-calling model calls its tool, the call
runs on the server, and its result reaches the model and the stream. A client never chooses where
Ragline connects: an assistant may name only servers the settings allow its tenant."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from ragline.settings import McpServer
from tests.agent_script import tool_messages
from tests.api.live import ThreadServer, answer_of, collect, frames, memory_settings, new_session, serve_embedded
from tests.scripted_model import Reply, ScriptedCall

V1 = "/api/v1"
KEYS = {"key-a": "acme"}
QUESTION = "Where is my order A-42?"


@pytest.fixture(scope="module")
def server(tmp_path_factory, scripted_server, orders_http) -> Iterator[ThreadServer]:
    root = tmp_path_factory.mktemp("agent-mcp")
    servers = {"orders": orders_http, "payroll": McpServer(transport="stdio", command="payroll-server", tenants=["globex"])}
    live = serve_embedded(root, memory_settings(scripted_server, api_keys=KEYS, data_dir=root, agent_mcp_servers=servers))
    yield live
    live.stop()


@pytest.fixture
async def acme(server, scripted_model) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=60, headers={"X-API-Key": "key-a"}) as client:
        yield client


async def create(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    response = await client.post(f"{V1}/assistants", json={"name": "Orders desk", "mode": "agent", **body})
    assert response.status_code == 201, response.text
    return response.json()


async def test_an_agent_calls_a_tool_of_the_mcp_server_its_assistant_names(acme, scripted_model):
    agent = await create(acme, tools=["search_knowledge"], mcp_servers=["orders"])
    scripted_model.on(lambda b: "tools" in b and not tool_messages(b),
                      Reply.calling(ScriptedCall("orders__lookup_order", {"order_id": "A-42"}, id="m1"), text="Let me look the order up."))
    scripted_model.on(lambda b: "tools" in b and len(tool_messages(b)) == 1, Reply.text("It shipped on 3 May with Nordpost (parcel NP-7781)."))
    sid = await new_session(acme, title="t")
    got = await collect(acme, "POST", f"{V1}/sessions/{sid}/knowledge-chat", json={"query": QUESTION, "assistant_id": agent["id"]})

    offered = [t["function"]["name"] for t in scripted_model.requests[0]["tools"]]
    assert offered[0] == "search_knowledge" and {"orders__lookup_order", "orders__cancel_order"} <= set(offered[1:])
    [call] = [f.event["data"] for f in got if f.type == "tool_call"]
    [result] = [f.event["data"] for f in got if f.type == "tool_result"]
    assert (call["tool_name"], call["arguments"]) == ("orders__lookup_order", {"order_id": "A-42"})
    assert result["success"] is True and "NP-7781" in result["output"]
    assert tool_messages(scripted_model.requests[1]) == ["Order A-42 shipped on 3 May 2026 with Nordpost, parcel NP-7781."]
    assert answer_of(got).endswith("(parcel NP-7781).") and got[-1].type == "complete"


async def test_an_mcp_tool_that_reports_an_error_is_a_failed_result_and_the_loop_goes_on(acme, scripted_model):
    agent = await create(acme, tools=["search_knowledge"], mcp_servers=["orders"])
    scripted_model.on(lambda b: "tools" in b and not tool_messages(b), Reply.calling(ScriptedCall("orders__lookup_order", {"order_id": "Z-9"}, id="m1")))
    scripted_model.on(lambda b: "tools" in b and len(tool_messages(b)) == 1, Reply.text("There is no order Z-9."))
    sid = await new_session(acme, title="t")
    got = await collect(acme, "POST", f"{V1}/sessions/{sid}/knowledge-chat", json={"query": "Where is Z-9?", "assistant_id": agent["id"]})
    [result] = [f.event["data"] for f in got if f.type == "tool_result"]
    assert result["success"] is False and "no order Z-9" in result["error"]
    assert tool_messages(scripted_model.requests[1])[0].startswith("Error: McpToolError: ") and answer_of(got) == "There is no order Z-9."


async def test_a_call_to_a_tool_of_a_server_needing_approval_waits_and_a_denial_is_the_models_to_handle(acme, scripted_model):
    agent = await create(acme, tools=["search_knowledge"], mcp_servers=["orders"], approval_tools=["orders__cancel_order"])
    scripted_model.on(lambda b: "tools" in b and not tool_messages(b),
                      Reply.calling(ScriptedCall("orders__cancel_order", {"order_id": "A-42"}, id="c1")))
    scripted_model.on(lambda b: "tools" in b and len(tool_messages(b)) == 1, Reply.text("I did not cancel it."))
    sid = await new_session(acme, title="t")
    got: list = []
    async with acme.stream("POST", f"{V1}/sessions/{sid}/knowledge-chat", json={"query": "Cancel A-42", "assistant_id": agent["id"]}) as response:
        async for frame in frames(response):
            got.append(frame)
            if frame.type == "tool_approval_required":
                for _ in range(100):
                    denied = await acme.post(f"{V1}/sessions/{sid}/approvals", json={"tool_call_id": "c1", "approved": False, "reason": "not now"})
                    if denied.status_code != 409:  # the pause is stored just after the event
                        break
                assert denied.status_code == 202, denied.text
    [waiting] = [f.event["data"] for f in got if f.type == "tool_approval_required"]
    assert (waiting["tool_name"], waiting["arguments"]) == ("orders__cancel_order", {"order_id": "A-42"})
    [result] = [f.event["data"] for f in got if f.type == "tool_result"]
    assert result["success"] is False and "the user denied this call: not now" in result["error"]
    assert answer_of(got) == "I did not cancel it."


@pytest.mark.parametrize("body, message", [
    ({"mcp_servers": ["elsewhere"]}, "mcp_servers names 'elsewhere', which is not an MCP server this service allows for the tenant (settings agent_mcp_servers; allowed: orders)"),
    ({"mcp_servers": ["payroll"]}, "mcp_servers names 'payroll', which is not an MCP server"),  # kept to another tenant
    ({"mcp_servers": ["Orders_1"]}, "should match pattern"),
    ({"approval_tools": ["orders"]}, "approval_tools names 'orders', which is neither a known tool"),
    ({"mcp_servers": ["orders"], "approval_tools": ["billing__refund"]}, "approval_tools names 'billing__refund', which is neither"),
])
async def test_an_assistant_may_name_only_servers_the_settings_allow_its_tenant(acme, body, message):
    response = await acme.post(f"{V1}/assistants", json={"name": "X", "mode": "agent", **body})
    assert response.status_code == 422 and message in response.json()["error"]["message"], response.text
