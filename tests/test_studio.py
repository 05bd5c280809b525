"""`langgraph dev` (what LangGraph Studio talks to) loads every graph of langgraph.json."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.scripted_model import _free_port

ROOT = Path(__file__).resolve().parents[1]
LANGGRAPH = shutil.which("langgraph", path=str(Path(sys.executable).parent))


@pytest.fixture(scope="module")
def dev_server(scripted_server):
    if LANGGRAPH is None:
        pytest.fail("langgraph-cli is part of the test extra; install it: pip install -e '.[test]'")
    port = _free_port()
    env = {**os.environ, "RAGLINE_CHAT_MODEL": "openai/scripted", "RAGLINE_CHAT_API_BASE": scripted_server.base_url,
           "RAGLINE_CHAT_API_KEY": "k", "LANGSMITH_TRACING": "false", "LANGGRAPH_NO_VERSION_CHECK": "true"}
    process = subprocess.Popen([LANGGRAPH, "dev", "--no-browser", "--no-reload", "--allow-blocking", "--port", str(port)], cwd=ROOT, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"{base}/ok", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail("langgraph dev did not start")
        time.sleep(0.5)
    yield base
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(timeout=30)


def test_langgraph_dev_lists_every_graph(dev_server):
    assistants = httpx.post(f"{dev_server}/assistants/search", json={"limit": 50}, timeout=30).json()
    expected = set(json.loads((ROOT / "langgraph.json").read_text())["graphs"])
    assert {a["graph_id"] for a in assistants} == expected


def test_studio_gets_the_request_settings_as_a_described_form(dev_server):
    assistants = httpx.post(f"{dev_server}/assistants/search", json={"graph_id": "ragline"}, timeout=30).json()
    schemas = httpx.get(f"{dev_server}/assistants/{assistants[0]['assistant_id']}/schemas", timeout=30).json()
    agent = schemas["context_schema"]["$defs"]["AgentConfig"]["properties"]
    assert {"rerank_top_k", "chat_model", "fallback_strategy", "web_search_enabled"} <= set(agent)
    assert all(field.get("description") for field in agent.values())


def test_a_run_answers_through_the_dev_server(dev_server, scripted_server):
    scripted_server.rules.clear()
    from tests.scripted_model import Reply

    scripted_server.on(lambda b: True, Reply.text("Hello from Studio."))
    body = {"assistant_id": "ragline", "input": {"request": {"query": "hi"}}, "context": {"agent": {"summary": {"max_tokens": 7}}}}
    result = httpx.post(f"{dev_server}/runs/wait", json=body, timeout=60).json()
    assert result["chat_response"]["content"] == "Hello from Studio."
    assert scripted_server.requests[-1]["max_tokens"] == 7


def test_studio_chat_graph_answers_messages_with_tokens_on_messages_tuple(dev_server, scripted_server):
    """ragline_chat in langgraph dev, through the official SDK: a messages input, the answer's
    tokens on messages-tuple, the session id following the thread."""
    import asyncio

    from langgraph_sdk import get_client

    from tests.scripted_model import Reply

    scripted_server.rules.clear()
    scripted_server.on(lambda b: True, Reply(chunks=["Hello", " from", " the chat graph."]))

    async def run() -> tuple[list[str], dict]:
        client = get_client(url=dev_server)
        thread = await client.threads.create()
        tokens: list[str] = []
        async for part in client.runs.stream(thread["thread_id"], "ragline_chat", input={"messages": [{"role": "user", "content": "hi"}]},
                                             stream_mode="messages-tuple"):
            if part.event == "messages":
                message, metadata = part.data
                if metadata.get("langgraph_node") == "chat_completion_stream" and message.get("content"):
                    tokens.append(message["content"])
        state = await client.threads.get_state(thread["thread_id"])
        return tokens, {"thread_id": thread["thread_id"], **state["values"]}

    tokens, values = asyncio.run(run())
    assert tokens == ["Hello", " from", " the chat graph."]
    assert values["messages"][-1]["content"] == "Hello from the chat graph."
    assert values["turn"]["session_id"] == values["thread_id"]


def test_studio_asks_over_a_knowledge_base_named_by_name_and_a_cancel_keeps_the_partial_answer(dev_server, scripted_server):
    """The README's Studio recipe: agent.knowledge_base_ids by name. Then a run cancelled through the
    SDK keeps what it had answered, marked stopped."""
    import asyncio

    from langgraph_sdk import get_client

    from ragline.services import Services
    from tests.knowledge_base import create_knowledge_base
    from tests.scripted_model import Reply

    services = Services.from_settings()  # the same data directory as the dev server's
    kb = create_knowledge_base(services, "studio-manuals", {
        "Pairing": "Pairing the Aurora sensor takes up to three minutes; hold its button until the light blinks blue."})
    asyncio.run(services.aclose())
    scripted_server.rules.clear()
    scripted_server.on(lambda b: "Pairing the Aurora" in json.dumps(b), Reply(chunks=["Up to", " three minutes", ' <ref id="c1"/>', "."]), times=1)
    scripted_server.on(lambda b: True, Reply(chunks=[f"w{i} " for i in range(60)], chunk_delay=0.1))

    async def run() -> tuple[list[str], dict, dict]:
        client = get_client(url=dev_server)
        thread = await client.threads.create()
        tokens: list[str] = []
        context = {"agent": {"knowledge_base_ids": ["studio-manuals"]}}
        async for part in client.runs.stream(thread["thread_id"], "ragline_chat", input={"messages": [{"role": "user", "content": "How long does pairing take?"}]},
                                             stream_mode="messages-tuple", context=context):
            if part.event == "messages" and part.data[1].get("langgraph_node") == "chat_completion_stream":
                tokens.append(part.data[0].get("content", ""))
        answered = (await client.threads.get_state(thread["thread_id"]))["values"]
        other = await client.threads.create()
        started = await client.runs.create(other["thread_id"], "ragline_chat", input={"messages": [{"role": "user", "content": "Tell me a long story"}]})
        await asyncio.sleep(2.5)
        await client.runs.cancel(other["thread_id"], started["run_id"], wait=True)
        cancelled = (await client.threads.get_state(other["thread_id"]))["values"]
        return tokens, answered, cancelled

    tokens, answered, cancelled = asyncio.run(run())
    assert "".join(tokens) == "Up to three minutes."
    assert answered["messages"][-1]["additional_kwargs"]["citations"][0]["knowledge_base_id"] == kb.id
    partial = cancelled["messages"][-1]
    assert partial["type"] == "ai" and partial["content"].startswith("w0 w1") and cancelled["chat_response"]["stopped"] is True
