"""Conversations as knowledge over HTTP (seed: IndexMessageToKB, SearchMessages,
UpdateSessionLastRequestState): a turn indexed into the user's chat-history knowledge base is
found by a later question in another session of that user, by the tenant's message search, and
never by another tenant. Real Chroma + bm25s + the local embedder; the scripted chat model."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from tests.api.live import ThreadServer, collect, memory_settings, new_session, serve_embedded, types
from tests.scripted_model import Reply, last_user_text

KEYS = {"key-ann": "acme/ann", "key-bob": "acme/bob", "key-globex-ann": "globex/ann"}
V1 = "/api/v1"
REMEMBER = "Please remember that the garage door code is 4711."
NOTED = "Noted: the garage door code is 4711."
ASK_AGAIN = "What is the code of the garage door?"


@pytest.fixture(scope="module")
def server(tmp_path_factory, scripted_server) -> Iterator[ThreadServer]:
    root = tmp_path_factory.mktemp("chat-history-api")
    settings = memory_settings(scripted_server, api_keys=KEYS, generate_titles=False)
    live = serve_embedded(root, settings)
    yield live
    live.stop()


def _client(server: ThreadServer, key: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.url, timeout=120, headers={"X-API-Key": key})


@pytest.fixture
async def ann(server, scripted_model) -> AsyncIterator[httpx.AsyncClient]:
    async with _client(server, "key-ann") as client:
        yield client


@pytest.fixture
async def bob(server, scripted_model) -> AsyncIterator[httpx.AsyncClient]:
    async with _client(server, "key-bob") as client:
        yield client


@pytest.fixture
async def globex_ann(server, scripted_model) -> AsyncIterator[httpx.AsyncClient]:
    async with _client(server, "key-globex-ann") as client:
        yield client


async def ask(client: httpx.AsyncClient, session_id: str, query: str, **options) -> list:
    body = {"query": query, "rewrite_enabled": False, **options}
    return await collect(client, "POST", f"{V1}/sessions/{session_id}/knowledge-chat", json=body)


def references(frames) -> list[dict]:
    return next((f.event["knowledge_references"] for f in frames if f.type == "references"), [])


async def search(client: httpx.AsyncClient, q: str, **params) -> dict:
    response = await client.get(f"{V1}/messages/search", params={"q": q, **params})
    assert response.status_code == 200, response.text
    return response.json()


async def found_eventually(client: httpx.AsyncClient, q: str, needle: str) -> list[dict]:
    """Indexing runs after `complete`, in the background: poll the search until it shows."""
    for _ in range(150):
        items = (await search(client, q))["items"]
        if any(needle in item["answer"] for item in items):
            return items
        await asyncio.sleep(0.2)
    raise AssertionError(f"{needle!r} was never indexed")


async def test_an_indexed_turn_is_found_by_a_later_question_of_the_same_user_and_never_by_another_tenant(ann, bob, globex_ann, scripted_model):
    scripted_model.on(lambda body: "remember" in last_user_text(body).lower(), Reply.text(NOTED))
    first = await new_session(ann)
    await ask(ann, first, REMEMBER, chat_history_index=True)
    items = await found_eventually(ann, "garage door code", "4711")
    assert items[0]["session_id"] == first and items[0]["user_id"] == "ann" and items[0]["question"] == REMEMBER

    # a later question in another session of the same user searches the past conversation
    second = await new_session(ann)
    scripted_model.requests.clear()
    got = await ask(ann, second, ASK_AGAIN, chat_history_search=True)
    assert any("4711" in ref.get("content", "") for ref in references(got))
    assert any("4711" in str(body["messages"]) for body in scripted_model.requests)

    # the same user name in another tenant finds nothing, by search or by question
    assert (await search(globex_ann, "garage door code"))["items"] == []
    other = await new_session(globex_ann)
    scripted_model.requests.clear()
    got = await ask(globex_ann, other, ASK_AGAIN, chat_history_search=True)
    assert "error" not in types(got)  # nothing to search is the plain "not found", not a refused base
    assert not any("4711" in ref.get("content", "") for ref in references(got))
    assert not any("4711" in str(body["messages"]) for body in scripted_model.requests)

    # another user of the tenant sees the tenant's messages in search, but their questions
    # search only their own past conversations
    assert any("4711" in item["answer"] for item in (await search(bob, "garage door code"))["items"])
    theirs = await new_session(bob)
    got = await ask(bob, theirs, ASK_AGAIN, chat_history_search=True)
    assert not any("4711" in ref.get("content", "") for ref in references(got))


async def test_turns_are_indexed_only_when_asked_and_forgotten_with_their_session(ann, scripted_model):
    scripted_model.on(lambda body: "boat" in last_user_text(body).lower(), Reply.text("Your boat is called Nautilus."))
    quiet = await new_session(ann)
    await ask(ann, quiet, "Remember my boat is called Nautilus.")
    kept = await new_session(ann)
    await ask(ann, kept, "Remember my sailing boat is called Nautilus.", chat_history_index=True)
    items = await found_eventually(ann, "Nautilus boat", "Nautilus")
    assert {item["session_id"] for item in items if "Nautilus" in item["answer"]} == {kept}
    assert (await ann.delete(f"{V1}/sessions/{kept}")).status_code == 200
    assert not any("Nautilus" in item["answer"] for item in (await search(ann, "Nautilus boat"))["items"])


async def test_message_search_is_keyword_or_vector_and_paged(ann, scripted_model):
    scripted_model.on(lambda body: "tulip" in last_user_text(body).lower(), Reply.text("Plant tulip bulbs in autumn."))
    for n in range(3):
        await ask(ann, await new_session(ann), f"When do I plant tulip bulbs, question {n}?", chat_history_index=True)
    for _ in range(150):
        if (await search(ann, "tulip bulbs", mode="keyword"))["total"] >= 3:
            break
        await asyncio.sleep(0.2)
    keyword = await search(ann, "tulip bulbs", mode="keyword", page_size=2)
    assert keyword["total"] >= 3 and len(keyword["items"]) == 2
    assert all(item["match_type"] == "keyword" for item in keyword["items"])
    second = await search(ann, "tulip bulbs", mode="keyword", page=2, page_size=2)
    assert {i["request_id"] for i in second["items"]}.isdisjoint({i["request_id"] for i in keyword["items"]})
    vector = await search(ann, "when should flower bulbs go into the ground", mode="vector")
    assert vector["items"] and all(item["match_type"] == "vector" for item in vector["items"])


async def test_message_search_bounds_its_input(ann):
    assert (await ann.get(f"{V1}/messages/search", params={"q": "x" * 1001})).status_code == 422
    assert (await ann.get(f"{V1}/messages/search", params={"q": "   "})).status_code == 422
    assert (await ann.get(f"{V1}/messages/search")).status_code == 422
    assert (await ann.get(f"{V1}/messages/search", params={"q": "a", "page_size": 101})).status_code == 422
    assert (await ann.get(f"{V1}/messages/search", params={"q": "a", "mode": "regex"})).status_code == 422
    assert (await httpx.AsyncClient(base_url=str(ann.base_url)).get(f"{V1}/messages/search", params={"q": "a"})).status_code == 401


async def test_each_session_keeps_its_last_request_state(ann, scripted_model):
    sid = await new_session(ann)
    await ask(ann, sid, "Hello there", chat_history_search=True, summary={"thinking": True})
    state = (await ann.get(f"{V1}/sessions/{sid}")).json()["last_request_state"]
    assert state["chat_history_search"] is True and state["thinking"] is True and state["web_search_enabled"] is False
    patched = await ann.patch(f"{V1}/sessions/{sid}", json={"last_request_state": {"knowledge_base_ids": ["kb1"], "web_search_enabled": True}})
    assert patched.status_code == 200 and patched.json()["last_request_state"]["knowledge_base_ids"] == ["kb1"]
    bad = await ann.patch(f"{V1}/sessions/{sid}", json={"last_request_state": {"secret": 1}})
    assert bad.status_code == 422
