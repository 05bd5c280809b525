"""The MCP door over streamable HTTP (/mcp on the service), with the official `mcp` client SDK:
the tools are listed, search and ask answer from a real knowledge base (local e5 embeddings,
Chroma, BM25; the scripted model answers), documents are read page by page, and a second tenant
sees nothing of the first's. Keys are checked exactly as on the REST API."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.api.jobs import knowledge_base_over_rest
from tests.api.live import ThreadServer, memory_settings, serve_embedded
from tests.scripted_model import Reply

KEYS = {"key-a": "acme", "key-b": "globex"}
V1 = "/api/v1"
WARRANTY = "The Borealis kettle has a warranty of two years. Keep the receipt to claim the warranty."
DESCALING = "Descale the Borealis kettle every month with citric acid to remove limescale."
MANUAL = "\n\n".join(f"Section {n}. The Borealis kettle's part number {n} is described here in some detail, " * 6 for n in range(1, 9))
TOOLS = {"list_knowledge_bases", "search", "ask", "read_document"}


@pytest.fixture(scope="module")
def server(tmp_path_factory, scripted_server) -> Iterator[ThreadServer]:
    root = tmp_path_factory.mktemp("mcp-http")
    live = serve_embedded(root, memory_settings(scripted_server, api_keys=KEYS, data_dir=root))
    yield live
    live.stop()


@pytest.fixture(scope="module")
def kettle(server) -> dict[str, Any]:
    """acme's knowledge base "kettle": two short documents and a long one, added over the REST API."""
    kb, ids = knowledge_base_over_rest(server.url, "key-a", "kettle", {"Warranty": WARRANTY, "Descaling": DESCALING, "Parts": MANUAL},
                                       description="kettle manual")
    return {"kb": kb, "warranty": ids["Warranty"], "manual": ids["Parts"]}


@asynccontextmanager
async def mcp_client(server: ThreadServer, key: str | None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http,
        streamable_http_client(f"{server.url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> Any:
    """The structured result of a successful call."""
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content


async def refused(session: ClientSession, tool: str, **arguments: Any) -> str:
    """The message of a call the server refused as a tool error."""
    result = await session.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return " ".join(block.text for block in result.content if block.type == "text")


async def test_the_tools_are_listed_with_bounded_inputs(server, kettle):
    async with mcp_client(server, "key-a") as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(tools) == TOOLS
    search = tools["search"].input_schema["properties"]
    assert search["query"]["maxLength"] == 4000 and search["top_k"]["maximum"] == 50
    assert tools["read_document"].input_schema["properties"]["limit"]["maximum"] == 100
    assert tools["ask"].output_schema is not None and "references" in tools["ask"].output_schema["properties"]


async def test_search_returns_the_rest_routes_passages_with_their_citation_data(server, kettle, scripted_model):
    async with mcp_client(server, "key-a") as session:
        found = await call(session, "search", query="how long is the warranty", knowledge_bases=["kettle"], top_k=3)
    passages = found["passages"]
    assert passages[0]["document_id"] == kettle["warranty"] and passages[0]["knowledge_base_id"] == kettle["kb"]
    assert passages[0]["title"] == "Warranty" and "two years" in passages[0]["content"] and passages[0]["score"] > 0
    async with httpx.AsyncClient(base_url=server.url, timeout=120, headers={"X-API-Key": "key-a"}) as acme:
        rest = (await acme.post(f"{V1}/knowledge-bases/search",
                                json={"query": "how long is the warranty", "knowledge_base_ids": [kettle["kb"]], "rerank_top_k": 3})).json()
    assert [(p["chunk_id"], p["score"]) for p in passages] == [(h["id"], h["score"]) for h in rest["items"]][:3]


async def test_ask_answers_in_plain_text_with_numbered_references(server, kettle, scripted_model):
    scripted_model.on(lambda body: True, Reply(chunks=["The warranty lasts two years", ' <ref id="c1"/>', "."]))
    async with mcp_client(server, "key-a") as session:
        answer = await call(session, "ask", question="How long is the warranty of the kettle?", knowledge_bases=[kettle["kb"]])
    assert re.fullmatch(r"The warranty lasts two years ?\[1\]\.", answer["answer"]) and "<kb" not in str(answer)
    first = answer["references"][0]
    assert first["number"] == 1 and not first["attributed"] and first["knowledge_base_id"] == kettle["kb"] and first["chunk_id"]
    prompt = str(scripted_model.requests[-1]["messages"])
    assert first["content"] and first["content"] in prompt.replace("\\n", "\n")  # the cited passage is the one the model was given
    uncited = [r for r in answer["references"] if r["number"] is None]
    assert len(answer["references"]) == 1 + len(uncited)
    assert re.fullmatch(r"[0-9a-f-]{32,36}", answer["session_id"])


async def test_ask_continues_a_conversation_by_its_session_id(server, kettle, scripted_model):
    scripted_model.on(lambda body: True, Reply.text("Two years."))
    async with mcp_client(server, "key-a") as session:
        first = await call(session, "ask", question="How long is the warranty?", knowledge_bases=["kettle"], footnotes=False)
        scripted_model.reset()  # turn 2 is rewritten with its history first: a reply that is no rewrite keeps the question as asked
        scripted_model.on(lambda body: not body.get("stream"), Reply.text("no rewrite"))
        scripted_model.on(lambda body: True, Reply.text("Keep the receipt."))
        second = await call(session, "ask", question="What must I keep to claim the warranty?", knowledge_bases=["kettle"],
                            session_id=first["session_id"])
    assert second["session_id"] == first["session_id"] and first["answer"] == "Two years."
    # the model cited nothing: Ragline matched the sentence to its passage, marked [1~] and attributed
    assert second["answer"] == "Keep the receipt.[1~]" and second["references"][0] | {"content": ""} == {
        **second["references"][0], "content": "", "number": 1, "attributed": True, "document_id": kettle["warranty"]}
    history = [m["content"] for m in scripted_model.requests[-1]["messages"] if m["role"] in ("user", "assistant")]
    assert history[0] == "How long is the warranty?" and history[1].startswith("Two years.")  # turn 1 reached turn 2's model call


async def test_read_document_pages_through_the_chunks(server, kettle, scripted_model):
    async with httpx.AsyncClient(base_url=server.url, timeout=60, headers={"X-API-Key": "key-a"}) as acme:
        rest = (await acme.get(f"{V1}/knowledge-bases/{kettle['kb']}/documents/{kettle['manual']}/chunks")).json()["items"]
    assert len(rest) >= 3
    pages, offset = [], 0
    async with mcp_client(server, "key-a") as session:
        while offset is not None:
            page = await call(session, "read_document", knowledge_base="kettle", document_id=kettle["manual"], offset=offset, limit=2)
            assert page["title"] == "Parts" and page["total_chunks"] == len(rest) and len(page["chunks"]) <= 2
            pages += page["chunks"]
            offset = page["next_offset"]
    assert [c["chunk_id"] for c in pages] == [c["id"] for c in rest]


async def test_bad_input_and_models_outside_the_allow_list_are_tool_errors(server, kettle, scripted_model):
    async with mcp_client(server, "key-a") as session:
        assert "query" in await refused(session, "search", query="x" * 4001, knowledge_bases=["kettle"])
        assert "top_k" in await refused(session, "search", query="warranty", knowledge_bases=["kettle"], top_k=500)
        assert "limit" in await refused(session, "read_document", knowledge_base="kettle", document_id=kettle["manual"], limit=1000)
        assert "not available" in await refused(session, "ask", question="q", knowledge_bases=["kettle"], model="ollama/llama3")
        assert "does not exist" in await refused(session, "search", query="warranty", knowledge_bases=["no-such-kb"])
    assert not any("llama3" in str(r.get("model")) for r in scripted_model.requests)


async def test_the_second_tenant_sees_nothing_of_the_first(server, kettle, scripted_model):
    scripted_model.on(lambda body: True, Reply.text("I do not know."))
    async with mcp_client(server, "key-a") as acme:
        asked = await call(acme, "ask", question="How long is the warranty?", knowledge_bases=["kettle"])
    async with mcp_client(server, "key-b") as globex:
        assert (await call(globex, "list_knowledge_bases"))["knowledge_bases"] == []
        messages = [
            await refused(globex, "search", query="warranty", knowledge_bases=[kettle["kb"]]),
            await refused(globex, "search", query="warranty", knowledge_bases=["kettle"]),
            await refused(globex, "read_document", knowledge_base=kettle["kb"], document_id=kettle["warranty"]),
            await refused(globex, "ask", question="How long is the warranty?", knowledge_bases=[kettle["kb"]]),
            await refused(globex, "ask", question="How long is the warranty?", session_id=asked["session_id"]),
        ]
    assert all("not found" in m or "does not exist" in m for m in messages), messages
    assert not any("two years" in m or "Warranty" in m for m in messages)
    async with mcp_client(server, "key-a") as acme:  # the same calls with the owner's key do reach it
        assert [kb["id"] for kb in (await call(acme, "list_knowledge_bases"))["knowledge_bases"]] == [kettle["kb"]]


async def test_a_request_without_a_valid_key_is_refused_before_mcp_reads_it(server):
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            response = await http.post("/mcp", json=hello, headers={"Accept": "application/json, text/event-stream", **headers})
            assert response.status_code == 401 and response.json()["error"]["code"] == "unauthorized"
            assert response.headers["www-authenticate"].startswith("Bearer")
    with pytest.raises(Exception):  # noqa: B017 (the SDK surfaces the 401 as its own error type)
        async with mcp_client(server, None) as session:
            await session.list_tools()


async def test_an_ask_the_client_gives_up_on_stops_its_turn(server, kettle, scripted_model):
    import anyio

    scripted_model.on(lambda body: True, Reply.text(" ".join(["slowly"] * 60), chunk_delay=0.2))
    question = "How long is the warranty, slowly?"
    with pytest.raises(TimeoutError):
        with anyio.fail_after(2):
            async with mcp_client(server, "key-a") as session:
                await session.call_tool("ask", {"question": question, "knowledge_bases": ["kettle"]})
    async with httpx.AsyncClient(base_url=server.url, timeout=30, headers={"X-API-Key": "key-a"}) as acme:
        sessions = (await acme.get(f"{V1}/sessions")).json()["items"]
        session_id = next(s["id"] for s in sessions if s["title"] == question)
        for _ in range(50):  # the stop lands within the run's grace period
            messages = (await acme.get(f"{V1}/sessions/{session_id}/messages")).json()["items"]
            if messages and messages[-1]["role"] == "assistant" and messages[-1]["stopped"]:
                break
            await anyio.sleep(0.2)
    assert messages[-1]["stopped"] and len(messages[-1]["content"].split()) < 60, messages


async def test_an_ask_counts_as_one_of_the_keys_answer_streams(scripted_server, scripted_model):
    import asyncio

    from ragline.api.app import create_app

    live = ThreadServer(create_app(memory_settings(scripted_server, api_keys=KEYS, max_streams_per_key=1))).start()
    try:
        scripted_model.on(lambda body: True, Reply.text(" ".join(["slowly"] * 10), chunk_delay=0.2))
        async with mcp_client(live, "key-a") as first, mcp_client(live, "key-a") as second:
            running = asyncio.create_task(first.call_tool("ask", {"question": "Say something slowly."}))
            await asyncio.sleep(1.0)  # the first answer streams
            assert "already streams" in await refused(second, "ask", question="And something else?")
            async with httpx.AsyncClient(base_url=live.url, timeout=30, headers={"X-API-Key": "key-a"}) as acme:
                sid = (await acme.post(f"{V1}/sessions", json={})).json()["id"]
                assert (await acme.post(f"{V1}/sessions/{sid}/chat", json={"query": "hi"})).status_code == 429
            done = await running
            assert not done.is_error and done.structured_content["answer"].startswith("slowly")
            assert (await call(second, "ask", question="Now?"))["answer"].startswith("slowly")  # the slot was given back
    finally:
        live.stop()
