"""An agent turn survives the SIGKILL of its replica (issue 28): two `ragline serve` processes on one
Redis, an agent-mode assistant, the replica killed during the model's second call; another takes
the run over from its record, resumes agent mode's graph (not the pipeline) from the checkpoint
after the tool round, and the answer is given once."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from tests.api.jobs import ingested
from tests.api.live import Frame, ProcessServer, answer_of, collect, frames, types
from tests.api.test_replicas import replica_env
from tests.redis_server import RedisServer
from tests.scripted_model import Reply, ScriptedCall, ScriptedModel

WORDS = " ".join(f"word{i}" for i in range(40))


@pytest.fixture(scope="module")
def env(redis_server: RedisServer, scripted_server: ScriptedModel, tmp_path_factory) -> dict[str, str]:
    redis_server.flush()
    return replica_env(redis_server, scripted_server, str(tmp_path_factory.mktemp("agent-replicas")))


@pytest.fixture(scope="module")
def replicas(env, tmp_path_factory) -> Iterator[list[ProcessServer]]:
    logs = tmp_path_factory.mktemp("agent-replica-logs")
    servers = [ProcessServer(env, log=logs / f"{name}.log").start() for name in ("a", "b")]
    yield servers
    for server in servers:
        server.stop()


def tool_results(body: dict) -> int:
    return sum(1 for m in body.get("messages", []) if m.get("role") == "tool")


async def test_an_agent_turn_whose_replica_is_killed_in_the_second_model_call_answers_once(env, replicas, scripted_model, tmp_path):
    victim = replicas[0]
    scripted_model.on(lambda b: "tools" in b and tool_results(b) == 0,
                      Reply.calling(ScriptedCall("search_knowledge", {"query": "durable runs"}, id="s1")))
    scripted_model.on(lambda b: "tools" in b and tool_results(b) == 1, Reply.text(WORDS, chunk_delay=0.08))
    head: list[Frame] = []
    async with httpx.AsyncClient(base_url=victim.url, timeout=120) as to_victim:
        kb = (await to_victim.post("/api/v1/knowledge-bases", json={"name": "durable-agent"})).json()["id"]
        added = await to_victim.post(f"/api/v1/knowledge-bases/{kb}/documents/text",
                                     json={"text": "Durable runs survive the death of their server.", "title": "Runs"})
        await ingested(to_victim, added)
        made = await to_victim.post("/api/v1/assistants", json={"name": "Researcher", "mode": "agent", "config": {"knowledge_base_ids": [kb]}})
        assert made.status_code == 201, made.text
        sid = (await to_victim.post("/api/v1/sessions", json={"title": "durable"})).json()["id"]
        ask = {"query": "What survives a dead server?", "assistant_id": made.json()["id"]}
        async with to_victim.stream("POST", f"/api/v1/sessions/{sid}/knowledge-chat", json=ask) as response:
            async for frame in frames(response):
                head.append(frame)
                if "tool_result" in types(head) and types(head[types(head).index("tool_result"):]).count("answer") == 5:
                    break  # five words into the second model call's answer
    victim.kill()  # no shutdown code runs; its lease is left to expire
    replicas[0] = restarted = ProcessServer(env, port=victim.port, log=tmp_path / "restarted.log").start()
    async with httpx.AsyncClient(base_url=restarted.url, timeout=60) as client:
        tail = await collect(client, "GET", f"/api/v1/sessions/{sid}/continue-stream", headers={"Last-Event-ID": head[-1].id})
        seen = types(head + tail)
        assert seen[-1] == "complete" and "error" not in seen, seen
        assert seen.count("tool_call") == 1 and seen.count("references") == 1  # the tool round ran once, before the crash
        assert answer_of(head + tail) == WORDS  # nothing lost, nothing twice
        for _ in range(50):
            messages = (await client.get(f"/api/v1/sessions/{sid}/messages")).json()["items"]
            if messages and messages[-1]["is_completed"]:
                break
            await asyncio.sleep(0.1)
        assert [m["role"] for m in messages] == ["user", "assistant"] and messages[-1]["content"] == WORDS
        assert messages[-1]["assistant_id"] == made.json()["id"] and messages[-1]["assistant_version"] == 1
    # the agent graph was resumed after its tool round: the search was not asked for again, the answer was
    assert [tool_results(b) for b in scripted_model.requests if "tools" in b] == [0, 1, 1]
