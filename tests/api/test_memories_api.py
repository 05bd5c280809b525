"""Long-term memory over HTTP: kept per tenant and user, recalled in that user's answers only."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from ragline.api.app import create_app
from tests.api.live import ThreadServer, collect, memory_settings, new_session
from tests.scripted_model import Reply

KEYS = {"key-ann": "acme/ann", "key-bob": "acme/bob"}
MEMORY = "The user prefers answers in German."
QUESTION = {"query": "Which language should you answer in?", "rewrite_enabled": False}


@pytest.fixture(scope="module")
def server(scripted_server) -> Iterator[ThreadServer]:
    live = ThreadServer(create_app(memory_settings(scripted_server, api_keys=KEYS, memory_store="memory"))).start()
    yield live
    live.stop()


@pytest.fixture
async def users(server, scripted_model) -> AsyncIterator[dict[str, httpx.AsyncClient]]:
    made = {name: httpx.AsyncClient(base_url=server.url, timeout=60, headers={"X-API-Key": f"key-{name}"}) for name in ("ann", "bob")}
    yield made
    for client in made.values():
        await client.aclose()


async def test_a_memory_added_for_one_user_is_recalled_in_that_users_answer_and_not_in_anothers(users, scripted_model):
    scripted_model.on(lambda b: True, Reply.text("Deutsch."))
    added = await users["ann"].post("/api/v1/memories", json={"text": MEMORY})
    assert added.status_code == 201, added.text

    ann = await collect(users["ann"], "POST", f"/api/v1/sessions/{await new_session(users['ann'])}/chat", json=QUESTION)
    ann_prompt = scripted_model.requests[-1]["messages"][0]["content"]
    bob = await collect(users["bob"], "POST", f"/api/v1/sessions/{await new_session(users['bob'])}/chat", json=QUESTION)
    bob_prompt = scripted_model.requests[-1]["messages"][0]["content"]

    recalled = [f.event for f in ann if f.type == "memory_recalled"]
    assert [m["content"] for m in recalled[0]["data"]["memories"]] == [MEMORY]
    assert MEMORY in ann_prompt
    assert not [f for f in bob if f.type == "memory_recalled"] and MEMORY not in bob_prompt


async def test_a_user_lists_and_deletes_only_their_own_memories(users):
    memory_id = (await users["ann"].post("/api/v1/memories", json={"text": "Ann likes tea."})).json()["id"]
    assert "Ann likes tea." not in [m["text"] for m in (await users["bob"].get("/api/v1/memories")).json()["items"]]
    assert (await users["bob"].delete(f"/api/v1/memories/{memory_id}")).status_code == 404
    assert (await users["ann"].delete(f"/api/v1/memories/{memory_id}")).status_code == 204
    assert "Ann likes tea." not in [m["text"] for m in (await users["ann"].get("/api/v1/memories")).json()["items"]]


@pytest.mark.parametrize("text", ["", "\t", " \n "])
async def test_an_empty_memory_is_refused_with_a_clear_error(users, text):
    response = await users["ann"].post("/api/v1/memories", json={"text": text})  # blanks were a 500 (schemathesis found "\t")
    assert response.status_code in (400, 422) and "text" in response.text
