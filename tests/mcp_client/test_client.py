"""Ragline's MCP client against a real MCP server (the official SDK's), over streamable HTTP and stdio."""

from __future__ import annotations

import pytest

from ragline import defaults
from ragline.mcp_client.client import McpClient, McpServerError
from ragline.mcp_client.names import split_name
from ragline.settings import McpServer


@pytest.fixture(params=["http", "stdio"])
def client(request, orders_http, orders_stdio) -> McpClient:
    return McpClient({"orders": orders_http if request.param == "http" else orders_stdio})


async def test_the_servers_tools_are_listed_with_qualified_names_and_a_call_answers(client):
    tools = {tool.qualified_name: tool for tool in await client.tools("orders")}
    assert {"orders__lookup_order", "orders__cancel_order", "orders__slow", "orders__huge"} <= set(tools)
    lookup = tools["orders__lookup_order"]
    assert "shipping state" in lookup.description and lookup.input_schema["required"] == ["order_id"]
    result = await client.call("orders", "lookup_order", {"order_id": "A-42"})
    assert (result.text, result.is_error) == ("Order A-42 shipped on 3 May 2026 with Nordpost, parcel NP-7781.", False)


async def test_a_tool_that_fails_returns_its_error(client):
    result = await client.call("orders", "lookup_order", {"order_id": "Z-1"})
    assert result.is_error and "no order Z-1" in result.text


async def test_a_huge_result_is_cut_with_a_note(orders_http):
    result = await McpClient({"orders": orders_http}).call("orders", "huge", {})
    assert len(result.text) < defaults.AGENT_MCP_RESULT_CHARS + 100 and "the result had 50000 characters" in result.text


async def test_a_call_slower_than_the_servers_timeout_fails_clearly(orders_http):
    client = McpClient({"orders": orders_http.model_copy(update={"timeout_s": 1.0})})
    with pytest.raises(McpServerError, match="did not answer slow within 1 s"):
        await client.call("orders", "slow", {"seconds": 5})


async def test_a_server_not_configured_or_not_reachable_is_an_error_not_a_connection():
    client = McpClient({"down": McpServer(transport="streamable_http", url="http://127.0.0.1:9/mcp", timeout_s=5)})
    with pytest.raises(McpServerError, match="no MCP server 'elsewhere' is configured"):
        await client.tools("elsewhere")
    with pytest.raises(McpServerError, match="'down' could not list its tools"):
        await client.tools("down")


def test_a_server_may_be_kept_to_some_tenants():
    client = McpClient({"orders": McpServer(transport="stdio", command="x", tenants=["acme"]), "open": McpServer(transport="stdio", command="x")})
    assert [client.allowed(name, "acme") for name in ("orders", "open", "gone")] == [True, True, False]
    assert [client.allowed(name, "globex") for name in ("orders", "open")] == [False, True]


def test_qualified_names_split_back_into_server_and_tool():
    assert split_name("orders__lookup_order") == ("orders", "lookup_order")
    assert split_name("orders__a__b") == ("orders", "a__b")
    assert split_name("search_knowledge") == ("", "search_knowledge")
    assert split_name("__x") == ("", "__x")
