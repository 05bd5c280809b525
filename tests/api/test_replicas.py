"""Several replicas on one Redis: exact resume across replicas, stop from another process, and a
run that survives the SIGKILL of its process. Each replica is `ragline serve` in a subprocess."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import httpx
import pytest

from ragline.citations.tags import UNSUPPORTED_MARK
from ragline.settings import McpServer
from tests.api.jobs import ingested
from tests.api.live import ProcessServer, answer_of, collect, frames, types
from tests.mcp_oauth_server import served_with_oauth
from tests.redis_server import RedisServer
from tests.scripted_model import Reply, ScriptedModel

ASK = {"query": "Tell me about durable runs", "rewrite_enabled": False}
WORDS = " ".join(f"word{i}" for i in range(40))


def replica_env(redis: RedisServer, model: ScriptedModel, data_dir: str) -> dict[str, str]:
    return {
        "RAGLINE_REDIS_URL": redis.url,
        "RAGLINE_DATA_DIR": data_dir,
        "RAGLINE_CHAT_MODEL": "openai/scripted",
        "RAGLINE_CHAT_API_BASE": model.base_url,
        "RAGLINE_CHAT_API_KEY": "k",
        "RAGLINE_RUN_LEASE_TTL_S": "1.5",  # a dead replica's runs are taken over quickly
        "RAGLINE_SSE_HEARTBEAT_S": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }


@pytest.fixture(scope="module")
def crm() -> Iterator[McpServer]:
    """An MCP server that needs each user's OAuth authorization (tests/mcp_oauth_server.py)."""
    with served_with_oauth() as server:
        yield server


@pytest.fixture(scope="module")
def env(redis_server: RedisServer, scripted_server: ScriptedModel, crm: McpServer, tmp_path_factory) -> dict[str, str]:
    redis_server.flush()
    # first turns make the rewrite call here too, so a replica can be killed while it runs
    return {**replica_env(redis_server, scripted_server, str(tmp_path_factory.mktemp("replicas"))), "RAGLINE_FIRST_TURN_INTENT": "model",
            "RAGLINE_AGENT_MCP_SERVERS": json.dumps({"crm": crm.model_dump(mode="json")}), "RAGLINE_PUBLIC_URL": "http://ragline.example"}


@pytest.fixture(scope="module")
def replicas(env, tmp_path_factory) -> Iterator[list[ProcessServer]]:
    logs = tmp_path_factory.mktemp("replica-logs")
    servers = [ProcessServer(env, log=logs / f"{name}.log").start() for name in ("a", "b")]
    yield servers
    for server in servers:
        server.stop()


async def new_session(url: str) -> str:
    async with httpx.AsyncClient(base_url=url) as client:
        return (await client.post("/api/v1/sessions", json={"title": "durable"})).json()["id"]


async def test_a_client_resumes_on_another_replica_with_exactly_the_rest(replicas, scripted_model):
    a, b = replicas
    scripted_model.on(lambda body: True, Reply.text(WORDS, chunk_delay=0.02))
    sid = await new_session(a.url)
    async with httpx.AsyncClient(base_url=a.url, timeout=30) as to_a, httpx.AsyncClient(base_url=b.url, timeout=30) as to_b:
        head = await collect(to_a, "POST", f"/api/v1/sessions/{sid}/chat", json=ASK, limit=8)
        tail = await collect(to_b, "GET", f"/api/v1/sessions/{sid}/continue-stream", headers={"Last-Event-ID": head[-1].id})
        assert [f.id for f in head + tail] == list(dict.fromkeys(f.id for f in head + tail))
        assert answer_of(head + tail) == WORDS and types(tail)[-1] == "complete"
        replay = await collect(to_b, "GET", f"/api/v1/sessions/{sid}/continue-stream",
                               params={"message_id": head[0].event["assistant_message_id"]})
        assert answer_of(replay) == WORDS and types(replay).count("answer") <= 2  # coalesced


async def test_a_stop_sent_to_another_replica_cancels_the_run_and_keeps_the_partial_answer(replicas, scripted_model):
    a, b = replicas
    scripted_model.on(lambda body: True, Reply(chunks=[f"w{i} " for i in range(200)], chunk_delay=0.05))
    sid = await new_session(a.url)
    got = []
    async with httpx.AsyncClient(base_url=a.url, timeout=30) as to_a, httpx.AsyncClient(base_url=b.url, timeout=30) as to_b:
        async with to_a.stream("POST", f"/api/v1/sessions/{sid}/chat", json=ASK) as response:
            async for frame in frames(response):
                got.append(frame)
                if types(got).count("answer") == 3 and "stop" not in types(got):
                    stopped = await to_b.post(f"/api/v1/sessions/{sid}/stop", json={})
                    assert stopped.json()["stopped"] is True
        assert "stop" in types(got) and got[-1].event["data"] == {"stopped": True}
        shown = answer_of(got)
        assert 0 < len(shown.split()) < 100  # far from the 200 words the model would have sent
        messages = (await to_b.get(f"/api/v1/sessions/{sid}/messages")).json()["items"]
        assert messages[-1]["stopped"] is True and messages[-1]["content"] == shown


async def test_a_run_whose_server_is_killed_completes_with_no_lost_or_repeated_text(env, replicas, scripted_model, tmp_path):
    victim = replicas[0]
    scripted_model.on(lambda body: True, Reply.text(WORDS, chunk_delay=0.08))
    sid = await new_session(victim.url)
    async with httpx.AsyncClient(base_url=victim.url, timeout=30) as to_victim:
        head = await collect(to_victim, "POST", f"/api/v1/sessions/{sid}/chat", json=ASK, limit=10)
    victim.kill()  # mid-answer: no shutdown code runs, its lease is left to expire
    replicas[0] = restarted = ProcessServer(env, port=victim.port, log=tmp_path / "restarted.log").start()
    async with httpx.AsyncClient(base_url=restarted.url, timeout=60) as client:
        # the browser reconnects to the same address; the run was taken over by a live replica
        tail = await collect(client, "GET", f"/api/v1/sessions/{sid}/continue-stream", headers={"Last-Event-ID": head[-1].id})
        assert answer_of(head + tail) == WORDS  # nothing lost, nothing twice
        assert types(tail)[-1] == "complete" and "replace" not in str([f.event.get("data") for f in tail])
        for _ in range(50):  # the replica that took over records the answer when the run completes
            messages = (await client.get(f"/api/v1/sessions/{sid}/messages")).json()["items"]
            if messages[-1]["is_completed"]:
                break
            await asyncio.sleep(0.1)
        assert [m["role"] for m in messages] == ["user", "assistant"]
        assert messages[-1]["content"] == WORDS and not messages[-1]["stopped"]
    assert sum(1 for body in scripted_model.requests if body.get("stream")) == 2  # the answer was generated again


def _is_rewrite(body: dict) -> bool:
    return "rewrite_query" in str(body["messages"][0].get("content", ""))


@pytest.mark.parametrize("stage_frames", [2, 4])  # killed in query understanding; killed in search
async def test_a_knowledge_chat_whose_server_is_killed_before_the_answer_still_answers_once(env, replicas, scripted_model, tmp_path, stage_frames):
    victim = replicas[0]
    scripted_model.on(_is_rewrite, Reply.text(json.dumps({"rewrite_query": "durable runs", "intent": "kb_search"}), delay=1.0))
    scripted_model.on(lambda body: True, Reply.text(WORDS, chunk_delay=0.02))
    async with httpx.AsyncClient(base_url=victim.url, timeout=120) as to_victim:
        kb = (await to_victim.post("/api/v1/knowledge-bases", json={"name": f"durable-{stage_frames}"})).json()["id"]
        added = await to_victim.post(f"/api/v1/knowledge-bases/{kb}/documents/text",
                                     json={"text": "Durable runs survive the death of their server.", "title": "Runs"})
        await ingested(to_victim, added)
        sid = (await to_victim.post("/api/v1/sessions", json={"title": "durable"})).json()["id"]
        ask = {"query": "What survives a dead server?", "knowledge_base_ids": [kb]}
        head = await collect(to_victim, "POST", f"/api/v1/sessions/{sid}/knowledge-chat", json=ask, limit=stage_frames)
    victim.kill()
    replicas[0] = restarted = ProcessServer(env, port=victim.port, log=tmp_path / f"restarted-{stage_frames}.log").start()
    async with httpx.AsyncClient(base_url=restarted.url, timeout=60) as client:
        tail = await collect(client, "GET", f"/api/v1/sessions/{sid}/continue-stream", headers={"Last-Event-ID": head[-1].id})
        # over a knowledge base the words, which no passage supports, end with the unsupported mark
        assert answer_of(head + tail) == WORDS + UNSUPPORTED_MARK, types(head + tail)
        assert types(tail)[-1] == "complete" and "error" not in types(tail)
        for _ in range(50):
            messages = (await client.get(f"/api/v1/sessions/{sid}/messages")).json()["items"]
            if messages and messages[-1]["is_completed"]:
                break
            await asyncio.sleep(0.1)
        assert [m["role"] for m in messages] == ["user", "assistant"] and messages[-1]["content"] == WORDS + UNSUPPORTED_MARK


async def test_a_tool_call_waiting_for_approval_survives_the_kill_of_its_server(env, replicas, scripted_model, tmp_path):
    """The pending approval is a checkpoint (an interrupt) plus the waiting call in Redis: a decision
    sent after the SIGKILL reaches the replica that took the run over, which resumes the graph there."""
    from tests.agent_script import DESIGNER, QUESTION, tool_messages
    from tests.scripted_model import ScriptedCall

    victim = replicas[0]
    scripted_model.on(lambda b: "tools" in b and len(tool_messages(b)) == 0,
                      Reply.calling(ScriptedCall("search_knowledge", {"query": "who designed the Aurora sensor"}, id="s1")))
    scripted_model.on(lambda b: "tools" in b and len(tool_messages(b)) == 1, Reply.text("Mira Holt."))
    async with httpx.AsyncClient(base_url=victim.url, timeout=120) as to_victim:
        kb = (await to_victim.post("/api/v1/knowledge-bases", json={"name": "approval"})).json()["id"]
        await ingested(to_victim, await to_victim.post(f"/api/v1/knowledge-bases/{kb}/documents/text", json={"text": DESIGNER, "title": "Aurora"}))
        made = await to_victim.post("/api/v1/assistants", json={"name": "Careful", "mode": "agent", "config": {"knowledge_base_ids": [kb]},
                                                               "tools": ["search_knowledge"], "approval_tools": ["search_knowledge"]})
        assert made.status_code == 201, made.text
        sid = (await to_victim.post("/api/v1/sessions", json={"title": "approval"})).json()["id"]
        head: list = []
        async with to_victim.stream("POST", f"/api/v1/sessions/{sid}/knowledge-chat", json={"query": QUESTION, "assistant_id": made.json()["id"]}) as response:
            async for frame in frames(response):
                head.append(frame)
                if frame.type == "tool_approval_required":
                    break
        for _ in range(100):  # the pause is durable once the run waits on the call (its checkpoint is written by then)
            if (await to_victim.get(f"/api/v1/sessions/{sid}/approvals")).json()["calls"]:
                break
            await asyncio.sleep(0.1)
    victim.kill()  # while the run waits: its lease lapses, and the other replica takes the run over
    replicas[0] = restarted = ProcessServer(env, port=victim.port, log=tmp_path / "restarted-approval.log").start()
    async with httpx.AsyncClient(base_url=restarted.url, timeout=60) as client:
        decided = await client.post(f"/api/v1/sessions/{sid}/approvals", json={"tool_call_id": "s1", "approved": True})
        assert decided.status_code == 202, decided.text
        tail = await collect(client, "GET", f"/api/v1/sessions/{sid}/continue-stream", headers={"Last-Event-ID": head[-1].id})
    kinds = types(tail)
    assert "tool_approval_required" not in kinds  # announced once, before the kill
    assert kinds.index("tool_approval_resolved") < kinds.index("tool_result") and kinds[-1] == "complete"
    [result] = [f.event["data"] for f in tail if f.type == "tool_result"]
    assert result["success"] is True and answer_of(head + tail) == "Mira Holt."
    first_rounds = [body for body in scripted_model.requests if "tools" in body and len(tool_messages(body)) == 0]
    assert len(first_rounds) == 1, [[m.get("role") for m in b["messages"]] for b in first_rounds]  # the first round was not asked again


async def test_an_mcp_authorization_started_on_a_killed_replica_finishes_on_another(env, replicas, scripted_model, tmp_path):
    """MCP OAuth's pending authorization is in Redis and the pause in the checkpoint: the browser's
    return reaches another replica, and the replica that took the run over goes on with the tool."""
    from urllib.parse import parse_qs, urlsplit

    from tests.agent_script import tool_messages
    from tests.scripted_model import ScriptedCall

    victim, other = replicas
    scripted_model.on(lambda b: "tools" in b and len(tool_messages(b)) == 0, Reply.calling(ScriptedCall("crm__my_accounts", {}, id="a1")))
    scripted_model.on(lambda b: "tools" in b and len(tool_messages(b)) == 1, Reply.text("You own Fjord Ltd and Harbour AB."))
    async with httpx.AsyncClient(base_url=victim.url, timeout=120) as to_victim:
        made = await to_victim.post("/api/v1/assistants", json={"name": "CRM", "mode": "agent", "tools": ["search_knowledge"], "mcp_servers": ["crm"]})
        assert made.status_code == 201, made.text
        sid = (await to_victim.post("/api/v1/sessions", json={"title": "oauth"})).json()["id"]
        head: list = []
        async with to_victim.stream("POST", f"/api/v1/sessions/{sid}/knowledge-chat", json={"query": "My accounts?", "assistant_id": made.json()["id"]}) as response:
            async for frame in frames(response):
                head.append(frame)
                if frame.type == "mcp_oauth_required":
                    break
    await asyncio.sleep(3)  # the pause is checkpointed right after its announcement
    victim.kill()
    replicas[0] = restarted = ProcessServer(env, port=victim.port, log=tmp_path / "restarted-oauth.log").start()
    link = head[-1].event["data"]["authorization_url"]
    assert parse_qs(urlsplit(link).query)["redirect_uri"] == ["http://ragline.example/api/v1/mcp/oauth/callback"]
    async with httpx.AsyncClient() as browser:
        granted = await browser.get(link)  # the server's page grants and sends the browser back, here to the other replica
        back = urlsplit(granted.headers["location"]).query
        page = await browser.get(f"{other.url}/api/v1/mcp/oauth/callback?{back}")
    assert page.status_code == 200, page.text
    async with httpx.AsyncClient(base_url=restarted.url, timeout=60) as client:
        tail = await collect(client, "GET", f"/api/v1/sessions/{sid}/continue-stream", headers={"Last-Event-ID": head[-1].id})
    kinds = types(tail)
    assert "mcp_oauth_required" not in kinds and kinds.index("mcp_oauth_resolved") < kinds.index("tool_result") and kinds[-1] == "complete"
    [result] = [f.event["data"] for f in tail if f.type == "tool_result"]
    assert result["success"] is True and "alice owns the accounts" in result["output"]
    assert answer_of(head + tail) == "You own Fjord Ltd and Harbour AB."
