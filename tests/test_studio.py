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
    # as people type it: no --allow-blocking (the dev server then rejects a blocking call on its event
    # loop), and checkpoints read back strictly (LangGraph's msgpack allow-list, soon its default)
    env = {**os.environ, "RAGLINE_CHAT_MODEL": "openai/scripted", "RAGLINE_CHAT_API_BASE": scripted_server.base_url,
           "RAGLINE_CHAT_API_KEY": "k", "LANGSMITH_TRACING": "false", "LANGGRAPH_NO_VERSION_CHECK": "true", "LANGGRAPH_STRICT_MSGPACK": "true"}
    process = subprocess.Popen([LANGGRAPH, "dev", "--no-browser", "--no-reload", "--port", str(port)], cwd=ROOT, env=env,
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


def test_published_assistants_are_the_graphs_assistants_in_studio_and_a_run_with_one_uses_its_configuration(dev_server, scripted_server):
    """`ragline assistant publish`: each assistant of the tenant becomes the LangGraph assistant of the
    same id on its mode's graph; publishing again follows an update and a delete. (A tenant of the
    test's own: `langgraph dev` keeps its assistants across restarts, in .langgraph_api.)"""
    import asyncio
    import uuid

    from langgraph_sdk import get_client

    from tests.scripted_model import Reply

    tenant = f"studio-{uuid.uuid4().hex[:8]}"

    def ragline(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "ragline", "assistant", *args, "--tenant", tenant], capture_output=True, text=True,
                              timeout=120, env=os.environ)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    bob = ragline("create", "Bob desk", "--set", "summary.prompt=You are Bob", "--set", "rewrite_enabled=false")
    agent = ragline("create", "Researcher", "--mode", "agent", "--tool", "search_knowledge")
    assert sorted(ragline("publish", "--url", dev_server).splitlines()) == sorted([
        f"created    {bob}  ragline  Bob desk", f"created    {agent}  ragline_agent  Researcher"])
    scripted_server.rules.clear()
    scripted_server.on(lambda b: "You are Bob" in json.dumps(b.get("messages")), Reply.text("I am Bob."))
    scripted_server.on(lambda b: "You are Carol" in json.dumps(b.get("messages")), Reply.text("I am Carol."))

    async def listed_and_asked() -> tuple[list[dict], dict, dict]:
        client = get_client(url=dev_server)
        ours = await client.assistants.search(metadata={"ragline_tenant": tenant}, limit=10)
        thread = await client.threads.create()
        await client.runs.wait(thread["thread_id"], bob, input={"request": {"query": "Who are you?"}})
        return ours, await client.assistants.get(agent), (await client.threads.get_state(thread["thread_id"]))["values"]

    ours, researcher, answered = asyncio.run(listed_and_asked())
    assert {(a["assistant_id"], a["graph_id"], a["name"]) for a in ours} == {(bob, "ragline", "Bob desk"), (agent, "ragline_agent", "Researcher")}
    assert researcher["context"]["agent_tools"] == ["search_knowledge"] and researcher["context"]["assistant_version"] == 1
    assert answered["chat_response"]["content"] == "I am Bob."
    assert answered["messages"][-1]["additional_kwargs"]["assistant_id"] == bob

    ragline("update", bob, "--set", "summary.prompt=You are Carol")
    ragline("delete", agent)
    assert sorted(ragline("publish", "--url", dev_server).splitlines()) == sorted([
        f"updated    {bob}  ragline  Bob desk", f"removed    {agent}  ragline_agent  Researcher"])
    assert ragline("publish", "--url", dev_server) == f"unchanged  {bob}  ragline  Bob desk"

    async def after_the_update() -> tuple[dict, list[dict], dict]:
        client = get_client(url=dev_server)
        answered = await client.runs.wait(None, bob, input={"request": {"query": "Who are you?"}})
        return await client.assistants.get(bob), await client.assistants.search(graph_id="ragline_agent", limit=10), answered

    carol, agents, answered = asyncio.run(after_the_update())
    assert carol["version"] == 2 and carol["context"]["assistant_version"] == 2 and answered["chat_response"]["content"] == "I am Carol."
    assert agent not in [a["assistant_id"] for a in agents] and len(agents) >= 1  # the graph's own default assistant stays
    ragline("delete", bob)
    assert ragline("publish", "--url", dev_server) == f"removed    {bob}  ragline  Bob desk"


def test_publishing_to_no_server_is_one_error_line(fresh_data_dir):
    done = subprocess.run([sys.executable, "-m", "ragline", "assistant", "publish", "--url", f"http://127.0.0.1:{_free_port()}"],
                          capture_output=True, text=True, timeout=120, env=os.environ)
    assert done.returncode == 2 and done.stderr.startswith("ragline: error: the LangGraph server at http://127.0.0.1:")
    assert done.stderr.strip().endswith("(is `langgraph dev` running there?)") and len(done.stderr.strip().splitlines()) == 1


def test_two_turns_over_the_sample_in_studios_chat_without_blocking_calls(dev_server, scripted_server):
    """Studio's chat view over the sample manual, two turns on one thread, through the official SDK:
    the retrieval, merge, memory and entity stages run their file reads in threads, so the dev
    server (no --allow-blocking, strict msgpack) answers both; the follow-up is rewritten with the first turn."""
    import asyncio

    from langgraph_sdk import get_client

    from ragline.ingestion.sample import ensure_sample_kb
    from ragline.services import Services
    from tests.scripted_model import Reply

    services = Services.from_settings()  # the same data directory as the dev server's
    asyncio.run(ensure_sample_kb(services.retrieval))
    asyncio.run(services.aclose())
    first, follow_up = "How long is the warranty of the Aurora?", "And what does it not cover?"

    def rewrite(body: dict) -> bool:
        return "rewrite_query" in body["messages"][0]["content"]

    def answering(question: str):  # the answer call for this question, the warranty passage in its context
        return lambda b: not rewrite(b) and question in json.dumps(b["messages"][-1]) and "two-year warranty" in json.dumps(b)

    scripted_server.rules.clear()
    scripted_server.on(lambda b: rewrite(b) and follow_up in json.dumps(b),
                       Reply.text(json.dumps({"rewrite_query": "What does the Aurora warranty not cover?", "intent": "kb_search"})))
    scripted_server.on(answering(follow_up), Reply.text("Batteries and lightning damage are not covered."))
    scripted_server.on(answering(first), Reply.text("The warranty is two years."))

    async def two_turns() -> tuple[list[str], list[dict], dict]:
        client = get_client(url=dev_server)
        thread = await client.threads.create()
        answers, errors = [], []
        for question in (first, follow_up):
            tokens: list[str] = []
            async for part in client.runs.stream(thread["thread_id"], "ragline_chat", input={"messages": [{"role": "user", "content": question}]},
                                                 stream_mode=["messages-tuple", "custom"], context={"agent": {"knowledge_base_ids": ["sample"]}}):
                if part.event == "error" or (part.event == "custom" and part.data.get("response_type") == "error"):
                    errors.append(part.data)
                elif part.event == "messages" and part.data[1].get("langgraph_node") == "chat_completion_stream":
                    tokens.append(part.data[0].get("content", ""))
            answers.append("".join(tokens))
        return answers, errors, (await client.threads.get_state(thread["thread_id"]))["values"]

    answers, errors, values = asyncio.run(two_turns())
    assert errors == []
    assert answers == ["The warranty is two years.", "Batteries and lightning damage are not covered."]
    assert [m["type"] for m in values["messages"]] == ["human", "ai", "human", "ai"]
    assert any(rewrite(body) and follow_up in json.dumps(body) for body in scripted_server.requests)  # the follow-up was rewritten
