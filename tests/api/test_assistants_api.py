"""Assistants over HTTP, embedded (SQLite) and shared (Redis): every route, the 4xx of bad input,
tenants apart, and turns that name an assistant: its configuration reaches the model, a turn may
set only what it allows, and each answer records the assistant's version it ran with."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from ragline.api.app import create_app
from ragline.settings import LOCAL_CHAT_MODEL
from tests.api.live import ThreadServer, answer_of, collect, memory_settings, new_session
from tests.scripted_model import Reply, system_text

V1 = "/api/v1"
KEYS = {"key-a": "acme", "key-b": "globex"}
BOB, CAROL = "You are Bob, the support desk.", "You are Carol, the sales desk."
QUIET = {"rewrite_enabled": False}  # no query-understanding call: the scripted model answers the answer only


@pytest.fixture(scope="module", params=["embedded", "shared"])
def server(request, scripted_server, tmp_path_factory) -> Iterator[ThreadServer]:
    """The service with API keys for two tenants; embedded: SQLite files, shared: one Redis."""
    shared: dict[str, Any] = {"checkpointer": "sqlite"}
    if request.param == "shared":
        redis = request.getfixturevalue("redis_server")
        redis.flush()
        shared = {"redis_url": redis.url, "checkpointer": "redis", "stream_manager": "redis"}
    settings = memory_settings(
        scripted_server, data_dir=tmp_path_factory.mktemp(f"assistants-{request.param}"), api_keys=KEYS,
        allowed_models=["openai/gpt-4o-mini", LOCAL_CHAT_MODEL], embedding_model="openai/scripted-embed", embedding_api_base=scripted_server.base_url,
        embedding_api_key="scripted-key", **shared,
    )
    live = ThreadServer(create_app(settings)).start()
    yield live
    live.stop()


@pytest.fixture
async def acme(server, scripted_model) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=30, headers={"X-API-Key": "key-a"}) as client:
        yield client


@pytest.fixture
async def globex(server, scripted_model) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=30, headers={"X-API-Key": "key-b"}) as client:
        yield client


async def create(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    response = await client.post(f"{V1}/assistants", json={"name": "Support", **body})
    assert response.status_code == 201, response.text
    return response.json()


def refused(response: httpx.Response, status: int, words: str) -> None:
    assert response.status_code == status, (response.status_code, response.text)
    assert words in response.json()["error"]["message"], response.text


async def ask(client: httpx.AsyncClient, sid: str, route: str = "chat", **body: Any) -> list:
    return await collect(client, "POST", f"{V1}/sessions/{sid}/{route}", json={"query": "Who are you?", **body})


async def test_an_assistant_is_created_read_listed_updated_to_new_versions_and_deleted(acme):
    made = await create(acme, description="first line", config={"summary": {"max_tokens": 64}, **QUIET}, tools=["search_knowledge"])
    assert made["version"] == 1 and made["mode"] == "pipeline" and made["tenant_id"] == "acme"
    assert made["config"]["summary"]["max_tokens"] == 64 and "rerank_top_k" in made["overridable"]  # default: every setting
    url = f"{V1}/assistants/{made['id']}"
    assert (await acme.get(url)).json() == made
    second = await acme.patch(url, json={"name": "Support v2", "config": {"fallback_response": "Ask the front desk."}})
    assert second.status_code == 200, second.text
    assert second.json()["version"] == 2 and second.json()["config"]["summary"]["max_tokens"] == 64  # the rest kept
    third = (await acme.patch(url, json={"config": {"summary": None}})).json()
    assert third["version"] == 3 and third["config"]["summary"] is None and third["config"]["fallback_response"] == "Ask the front desk."
    assert (await acme.get(url)).json()["name"] == "Support v2"
    assert (await acme.get(url, params={"version": 1})).json() == made
    refused(await acme.get(url, params={"version": 9}), 404, "has no version 9")
    other = await create(acme, name="Sales")
    page = (await acme.get(f"{V1}/assistants", params={"page_size": 1})).json()
    assert [a["id"] for a in page["items"]] == [other["id"]] and page["total"] >= 2 and page["page_size"] == 1
    assert (await acme.delete(url)).json() == {"deleted": [made["id"]]}
    refused(await acme.get(url), 404, "not found")
    refused(await acme.get(url, params={"version": 1}), 404, "")
    refused(await acme.delete(url), 404, "not found")
    assert made["id"] not in [a["id"] for a in (await acme.get(f"{V1}/assistants", params={"page_size": 100})).json()["items"]]


@pytest.mark.parametrize(("body", "status", "words"), [
    ({"name": "a", "surprise": 1}, 422, "surprise is not a known setting"),
    ({"name": "a", "config": {"temperature": 0.2}}, 422, "config.temperature is not a known setting"),
    ({"name": "a", "config": {"rerank_top_k": 0}}, 422, "config.rerank_top_k must be at least 1"),
    ({"name": "a", "config": {"chat_model": "ollama/llama3"}}, 400, "chat_model 'ollama/llama3' is not available"),
    ({"name": "a", "config": {"rerank_model": "cohere/rerank-v3"}}, 400, "rerank_model 'cohere/rerank-v3' is not available"),
    ({"name": "a", "config": {"query_understand_model": "ollama/x"}}, 400, "query_understand_model 'ollama/x' is not available"),
    ({"name": "a", "config": {"vlm_model": "ollama/llava"}}, 400, "vlm_model 'ollama/llava' is not available"),
    ({"name": "a", "overridable": ["query_speed"]}, 422, "'query_speed' is not a request setting"),
    ({"name": "a", "tools": ["shell"]}, 422, "'shell' is not a known tool"),
    ({"name": "a", "mode": "swarm"}, 422, "mode must be 'pipeline' or 'agent'"),
    ({"name": "\u202e\x00"}, 422, "an assistant needs a name"),
    ({"name": "x" * 201}, 422, "name is too long: at most 200 characters"),
    ({}, 422, "name is required"),
    ({"name": "a", "config": {"knowledge_base_ids": ["no-such-kb"]}}, 404, "knowledge base no-such-kb does not exist"),
    ({"name": "a", "config": {"knowledge_ids": ["no-such-doc"]}}, 404, "document no-such-doc not found"),
])
async def test_bad_assistant_input_is_a_4xx_in_plain_words(acme, body, status, words):
    refused(await acme.post(f"{V1}/assistants", json=body), status, words)


async def test_a_bad_update_is_refused_and_writes_no_version(acme):
    made = await create(acme, config={"chat_model": "openai/gpt-4o-mini"})
    url = f"{V1}/assistants/{made['id']}"
    refused(await acme.patch(url, json={"config": {"chat_model": "ollama/llama3"}}), 400, "chat_model 'ollama/llama3' is not available")
    refused(await acme.patch(url, json={"version": 7}), 422, "version is not a known setting")
    refused(await acme.patch(url, json={"overridable": ["nope"]}), 422, "'nope' is not a request setting")
    refused(await acme.get(url, params={"version": 0}), 422, "version must be at least 1")
    assert (await acme.get(url)).json()["version"] == 1


async def test_an_assistant_may_not_name_a_knowledge_base_of_another_tenant(acme, globex):
    theirs = (await globex.post(f"{V1}/knowledge-bases", json={"name": "globex-secrets"})).json()["id"]
    mine = (await acme.post(f"{V1}/knowledge-bases", json={"name": "acme-manuals"})).json()["id"]
    for config in ({"knowledge_base_ids": [theirs]}, {"search_targets": [{"knowledge_base_id": theirs}]}):
        refused(await acme.post(f"{V1}/assistants", json={"name": "spy", "config": config}), 404, "does not exist")
    made = await create(acme, config={"knowledge_base_ids": [mine]})
    refused(await acme.patch(f"{V1}/assistants/{made['id']}", json={"config": {"knowledge_base_ids": [mine, theirs]}}), 404, "does not exist")


async def test_another_tenants_assistant_is_not_found_through_any_route(acme, globex):
    made = await create(acme, name="Acme only", config=QUIET)
    url = f"{V1}/assistants/{made['id']}"
    for method, kwargs in (("GET", {}), ("GET", {"params": {"version": 1}}), ("PATCH", {"json": {"name": "mine"}}), ("DELETE", {})):
        refused(await globex.request(method, url, **kwargs), 404, "not found")
    assert made["id"] not in [a["id"] for a in (await globex.get(f"{V1}/assistants")).json()["items"]]
    sid = await new_session(globex, title="spy")
    refused(await globex.post(f"{V1}/sessions/{sid}/chat", json={"query": "hi", "assistant_id": made["id"]}), 404, "not found")
    assert (await acme.get(url)).json() == made  # untouched


async def test_a_turn_runs_with_the_assistants_latest_version_and_its_answer_records_it(acme, scripted_model):
    scripted_model.on(lambda body: BOB in system_text(body), Reply.text("I am Bob."))
    scripted_model.on(lambda body: CAROL in system_text(body), Reply.text("I am Carol."))
    made = await create(acme, config={"summary": {"prompt": BOB, "max_tokens": 42}, **QUIET})
    sid = await new_session(acme, title="desk")
    assert answer_of(await ask(acme, sid, assistant_id=made["id"])) == "I am Bob."
    assert scripted_model.requests[-1]["max_tokens"] == 42
    await acme.patch(f"{V1}/assistants/{made['id']}", json={"config": {"summary": {"prompt": CAROL, "max_tokens": 17}}})
    assert answer_of(await ask(acme, sid, assistant_id=made["id"])) == "I am Carol."
    assert scripted_model.requests[-1]["max_tokens"] == 17
    assert answer_of(await ask(acme, sid, **QUIET)) == "scripted answer"  # a turn without one: the defaults again
    items = (await acme.get(f"{V1}/sessions/{sid}/messages")).json()["items"]
    answers = [(m["content"], m["assistant_id"], m["assistant_version"]) for m in items if m["role"] == "assistant"]
    assert answers == [("I am Bob.", made["id"], 1), ("I am Carol.", made["id"], 2), ("scripted answer", None, None)]


async def test_a_turn_may_set_only_the_settings_its_assistant_allows(acme, scripted_model):
    made = await create(acme, config={"summary": {"max_tokens": 42}, **QUIET}, overridable=["language"])
    sid = await new_session(acme, title="t")
    refused(await acme.post(f"{V1}/sessions/{sid}/chat", json={"query": "hi", "assistant_id": made["id"], "summary": {"max_tokens": 900}}),
            422, "summary is set by assistant 'Support' and a turn may not override it (it allows: language)")
    refused(await acme.post(f"{V1}/sessions/{sid}/chat", json={"query": "hi", "assistant_id": made["id"], "rewrite_enabled": False}),
            422, "rewrite_enabled is set by assistant")
    refused(await acme.post(f"{V1}/sessions/{sid}/chat", json={"query": "hi", "assistant_id": made["id"], "language": 5}),
            422, "language must be text")
    got = await ask(acme, sid, assistant_id=made["id"], language="English")
    assert got[-1].type == "complete" and scripted_model.requests[-1]["max_tokens"] == 42


async def test_a_turn_naming_an_unknown_or_deleted_assistant_or_an_agent_on_the_local_model_is_refused(acme):
    sid = await new_session(acme, title="t")
    chat = f"{V1}/sessions/{sid}/chat"
    refused(await acme.post(chat, json={"query": "hi", "assistant_id": "no-such-assistant"}), 404, "assistant no-such-assistant not found")
    refused(await acme.post(chat, json={"query": "hi", "assistant_id": 7}), 422, "assistant_id must be an assistant's id")
    gone = await create(acme, config=QUIET)
    await acme.delete(f"{V1}/assistants/{gone['id']}")
    refused(await acme.post(chat, json={"query": "hi", "assistant_id": gone["id"]}), 404, "not found")
    agent = await create(acme, name="Researcher", mode="agent", tools=["search_knowledge", "web_search"])
    assert (await acme.get(f"{V1}/assistants/{agent['id']}")).json()["tools"] == ["search_knowledge", "web_search"]
    local = await create(acme, name="Local researcher", mode="agent", config={"chat_model": LOCAL_CHAT_MODEL})
    refused(await acme.post(chat, json={"query": "hi", "assistant_id": local["id"]}), 422,
            f"agent mode needs a model with tool calling; the local model {LOCAL_CHAT_MODEL}")


async def test_an_assistants_knowledge_bases_and_fallback_reach_a_knowledge_chat_turn(acme):
    kb = (await acme.post(f"{V1}/knowledge-bases", json={"name": "empty-manuals"})).json()["id"]
    made = await create(acme, config={"knowledge_base_ids": [kb], "fallback_response": "Ask the front desk.", **QUIET})
    sid = await new_session(acme, title="t")
    got = await ask(acme, sid, route="knowledge-chat", assistant_id=made["id"])
    assert answer_of(got) == "Ask the front desk."  # the assistant's base was searched, found nothing, and its fallback answered
    refused(await acme.post(f"{V1}/sessions/{sid}/chat", json={"query": "hi", "assistant_id": made["id"]}), 400, "use knowledge-chat")
