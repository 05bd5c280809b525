"""Agent mode through the HTTP API (issue 28): a turn naming an agent-mode assistant runs agent mode's
graph (graph/agent.py) on the run manager, with the scripted tool-calling model and a real knowledge
base made over REST (the local e5 embedder, Chroma, BM25). Two search rounds, then an answer citing
passages of both; the saved message records the assistant. The local model is refused up front."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from ragline.settings import LOCAL_CHAT_MODEL
from tests.agent_script import BIRTHPLACE, DESIGNER, QUESTION, CitingAnswer, tool_messages
from tests.api.jobs import knowledge_base_over_rest
from tests.api.live import ThreadServer, answer_of, collect, frames, memory_settings, new_session, serve_embedded
from tests.scripted_model import Reply, ScriptedCall

V1 = "/api/v1"
KEYS = {"key-a": "acme"}
KB_TAG = re.compile(r'<kb chunk_id="([^"]+)"')


@pytest.fixture(scope="module")
def server(tmp_path_factory, scripted_server) -> Iterator[ThreadServer]:
    root = tmp_path_factory.mktemp("agent-turns")
    live = serve_embedded(root, memory_settings(scripted_server, api_keys=KEYS, data_dir=root, allowed_models=[LOCAL_CHAT_MODEL]))
    yield live
    live.stop()


@pytest.fixture(scope="module")
def people(server) -> str:
    kb, _ = knowledge_base_over_rest(server.url, "key-a", "people", {"Aurora": DESIGNER, "Holt": BIRTHPLACE})
    return kb


@pytest.fixture
async def acme(server, scripted_model) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=60, headers={"X-API-Key": "key-a"}) as client:
        yield client


async def create(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    response = await client.post(f"{V1}/assistants", json={"name": "Researcher", "mode": "agent", **body})
    assert response.status_code == 201, response.text
    return response.json()


def script_two_rounds(scripted_model: Any) -> None:
    answer = CitingAnswer()
    scripted_model.on(lambda b: "tools" in b and len(tool_messages(b)) == 0,
                      Reply.calling(ScriptedCall("search_knowledge", {"query": "who designed the Aurora sensor"}, id="s1"),
                                    text="First I look up who designed the Aurora sensor."))
    scripted_model.on(lambda b: "tools" in b and len(tool_messages(b)) == 1,
                      Reply.calling(ScriptedCall("search_knowledge", {"query": "where was Mira Holt born"}, id="s2"),
                                    text="Now where Mira Holt was born."))
    scripted_model.on(lambda b: "tools" in b and len(tool_messages(b)) == 2 and answer.cite(b), answer)


async def test_an_agent_mode_assistant_answers_through_the_api_in_two_search_rounds_citing_both(acme, people, scripted_model):
    made = await create(acme, config={"knowledge_base_ids": [people]}, tools=["search_knowledge", "read_document"])
    assert made["tools"] == ["search_knowledge", "read_chunks"]  # the old name of the tool is the tool
    script_two_rounds(scripted_model)
    sid = await new_session(acme, title="t")
    got = await collect(acme, "POST", f"{V1}/sessions/{sid}/knowledge-chat", json={"query": QUESTION, "assistant_id": made["id"]})

    seen = [("thought" if (f.event.get("data") or {}).get("thought") else f.type) for f in got]
    assert seen[0] == "agent_query" and seen[-1] == "complete" and "error" not in seen
    assert seen.count("agent_query") == 1 and seen.count("complete") == 1
    assert [k for k in seen if k in ("thought", "tool_call", "tool_result", "references")] == [
        "thought", "tool_call", "tool_result", "thought", "tool_call", "tool_result", "references"]
    calls = [f.event["data"] for f in got if f.type == "tool_call"]
    assert [(c["tool_name"], c["arguments"]["query"]) for c in calls] == [("search_knowledge", "who designed the Aurora sensor"),
                                                                          ("search_knowledge", "where was Mira Holt born")]
    assert all(f.event["data"]["success"] for f in got if f.type == "tool_result")
    # the model was offered only the tools the assistant allows, on the agent graph's requests
    assert [t["function"]["name"] for t in scripted_model.requests[0]["tools"]] == ["search_knowledge", "read_chunks"]
    assert len(scripted_model.requests) == 3

    final = "".join(f.event["content"] for f in got if f.type == "answer" and (f.event.get("data") or {}).get("segment") == 2)
    cited = KB_TAG.findall(final)
    references = {r["chunk_id"]: r["content"] for f in got if f.type == "references" for r in f.event["knowledge_references"]}
    assert len(cited) == 2 and set(cited) <= set(references)
    assert "designed by" in references[cited[0]] and "born in" in references[cited[1]]  # one passage of each round

    items = (await acme.get(f"{V1}/sessions/{sid}/messages")).json()["items"]
    [saved] = [m for m in items if m["role"] == "assistant"]
    assert saved["content"].startswith("Mira Holt designed it") and KB_TAG.findall(saved["content"]) == cited
    assert (saved["assistant_id"], saved["assistant_version"]) == (made["id"], 1)
    assert answer_of(got).endswith(saved["content"])  # the superseded introductions went first, then this answer


async def test_a_pipeline_turn_and_an_agent_turn_share_a_session(acme, people, scripted_model):
    agent = await create(acme, config={"knowledge_base_ids": [people]}, tools=["search_knowledge"])
    scripted_model.on(lambda b: "tools" in b, Reply.text("The agent says hello."))
    scripted_model.on(lambda b: True, Reply.text("The pipeline says hello."))
    sid = await new_session(acme, title="t")
    first = await collect(acme, "POST", f"{V1}/sessions/{sid}/chat", json={"query": "hi", "rewrite_enabled": False})
    second = await collect(acme, "POST", f"{V1}/sessions/{sid}/knowledge-chat", json={"query": "and you?", "assistant_id": agent["id"]})
    assert (answer_of(first), answer_of(second)) == ("The pipeline says hello.", "The agent says hello.")
    items = (await acme.get(f"{V1}/sessions/{sid}/messages")).json()["items"]
    assert [(m["role"], m["content"]) for m in items] == [("user", "hi"), ("assistant", "The pipeline says hello."),
                                                          ("user", "and you?"), ("assistant", "The agent says hello.")]


async def test_an_agent_mode_assistant_on_the_local_model_is_refused_before_the_turn(acme, people, scripted_model):
    local = await create(acme, config={"knowledge_base_ids": [people], "chat_model": LOCAL_CHAT_MODEL})
    sid = await new_session(acme, title="t")
    response = await acme.post(f"{V1}/sessions/{sid}/knowledge-chat", json={"query": QUESTION, "assistant_id": local["id"]})
    assert response.status_code == 422, response.text
    message = response.json()["error"]["message"]
    assert message.startswith(f"agent mode needs a model with tool calling; the local model {LOCAL_CHAT_MODEL}")
    assert scripted_model.requests == []
    assert (await acme.get(f"{V1}/sessions/{sid}/messages")).json()["items"] == []  # no turn was started


async def test_a_message_sent_while_the_agent_runs_is_read_at_its_next_step(acme, people, scripted_model):
    agent = await create(acme, config={"knowledge_base_ids": [people]}, tools=["search_knowledge"])
    told = "Only the city, please."
    scripted_model.on(lambda b: "tools" in b and len(tool_messages(b)) == 0,
                      Reply.calling(ScriptedCall("search_knowledge", {"query": "who designed the Aurora sensor"}, id="s1"), delay=1.5))
    scripted_model.on(lambda b: "tools" in b and any(m.get("content") == told for m in b["messages"]), Reply.text("Tromsø."))
    sid = await new_session(acme, title="t")
    nothing = await acme.post(f"{V1}/sessions/{sid}/inject", json={"content": told})
    assert nothing.status_code == 409 and "nothing is being generated" in nothing.json()["error"]["message"]

    got: list = []
    async with acme.stream("POST", f"{V1}/sessions/{sid}/knowledge-chat", json={"query": QUESTION, "assistant_id": agent["id"]}) as response:
        async for frame in frames(response):
            got.append(frame)
            if frame.type == "agent_query":  # the run is registered; its first model call takes 1.5 s
                sent = await acme.post(f"{V1}/sessions/{sid}/inject", json={"content": told})
                assert sent.status_code == 202, sent.text

    kinds = [f.type for f in got]
    # read at the loop's next model step: the first one when it had not started yet, else the one after the tool round
    assert kinds.index("user_message_injected") < kinds.index("answer")
    assert any(m.get("content") == told for m in scripted_model.requests[-1]["messages"])
    assert [f.event["content"] for f in got if f.type == "user_message_injected"] == [told]
    assert answer_of(got).endswith("Tromsø.") and kinds[-1] == "complete"
    items = (await acme.get(f"{V1}/sessions/{sid}/messages")).json()["items"]
    assert [(m["role"], m["content"]) for m in items] == [("user", QUESTION), ("user", told), ("assistant", "Tromsø.")]


async def test_a_call_needing_approval_waits_for_the_owners_decision_then_runs(acme, people, scripted_model):
    agent = await create(acme, config={"knowledge_base_ids": [people]}, tools=["search_knowledge"], approval_tools=["search_knowledge"])
    scripted_model.on(lambda b: "tools" in b and len(tool_messages(b)) == 0,
                      Reply.calling(ScriptedCall("search_knowledge", {"query": "who designed the Aurora sensor"}, id="s1")))
    scripted_model.on(lambda b: "tools" in b and len(tool_messages(b)) == 1, Reply.text("Mira Holt."))
    sid = await new_session(acme, title="t")
    got: list = []
    async with acme.stream("POST", f"{V1}/sessions/{sid}/knowledge-chat", json={"query": QUESTION, "assistant_id": agent["id"]}) as response:
        async for frame in frames(response):
            got.append(frame)
            if frame.type != "tool_approval_required":
                continue
            assert frame.event["data"]["tool_call_id"] == "s1"
            assert await waiting_calls(acme, sid) == [{"tool_call_id": "s1", "decided": False}]
            unknown = await acme.post(f"{V1}/sessions/{sid}/approvals", json={"tool_call_id": "nope", "approved": True})
            assert unknown.status_code == 409 and "no tool call nope waits" in unknown.json()["error"]["message"]
            approved = await acme.post(f"{V1}/sessions/{sid}/approvals", json={"tool_call_id": "s1", "approved": True})
            assert approved.status_code == 202 and approved.json()["approved"] is True, approved.text
            again = await acme.post(f"{V1}/sessions/{sid}/approvals", json={"tool_call_id": "s1", "approved": False})
            assert again.status_code == 409  # decided already: the first decision holds
            assert (await acme.get(f"{V1}/sessions/{sid}/approvals")).json()["calls"] in ([{"tool_call_id": "s1", "decided": True}], [])

    kinds = [f.type for f in got]
    assert kinds.index("tool_approval_required") < kinds.index("tool_approval_resolved") < kinds.index("tool_call") < kinds.index("tool_result")
    [result] = [f.event["data"] for f in got if f.type == "tool_result"]
    assert result["success"] is True and answer_of(got).endswith("Mira Holt.") and kinds[-1] == "complete"
    nothing = await acme.post(f"{V1}/sessions/{sid}/approvals", json={"tool_call_id": "s1", "approved": True})
    assert nothing.status_code == 409  # the answer is done: nothing waits
    assert (await acme.get(f"{V1}/sessions/{sid}/approvals")).json() == {"message_id": None, "calls": []}


async def waiting_calls(client, sid: str) -> list[dict]:
    """The calls the session's answer waits on, once it waits (the event comes just before the pause is stored)."""
    for _ in range(100):
        calls = (await client.get(f"{V1}/sessions/{sid}/approvals")).json()["calls"]
        if calls:
            return calls
        await asyncio.sleep(0.05)
    return []


async def test_an_assistant_may_not_ask_approval_for_a_tool_it_does_not_offer(acme):
    response = await acme.post(f"{V1}/assistants", json={"name": "R", "mode": "agent", "tools": ["search_knowledge"], "approval_tools": ["web_fetch"]})
    assert response.status_code == 422 and "'web_fetch', which the assistant's tools do not include" in response.json()["error"]["message"]


async def test_an_update_may_not_leave_an_approval_tool_outside_the_tools(acme):
    body = {"name": "R", "mode": "agent", "tools": ["search_knowledge", "read_chunks"], "approval_tools": ["search_knowledge"]}
    assistant = (await acme.post(f"{V1}/assistants", json=body)).json()
    for change in ({"tools": ["read_chunks"]}, {"approval_tools": ["web_fetch"]}):
        response = await acme.patch(f"{V1}/assistants/{assistant['id']}", json=change)
        assert response.status_code == 422 and "which the assistant's tools do not include" in response.json()["error"]["message"]
    stored = (await acme.get(f"{V1}/assistants/{assistant['id']}")).json()
    assert (stored["version"], stored["tools"], stored["approval_tools"]) == (1, ["search_knowledge", "read_chunks"], ["search_knowledge"])
