"""GET /api/v1/messages/search shares the pipeline's rerank chain when a rerank model is configured
(seed: SearchMessages, "vector + rerank"; the search API does the same): the model's scores decide,
and a turn below the rerank threshold is dropped although its words match best.
Real Chroma + bm25s + the local embedder; the scripted server is the chat and the rerank model."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from tests.api.live import ThreadServer, collect, memory_settings, new_session, serve_embedded
from tests.scripted_model import Reply, last_user_text

V1 = "/api/v1"
GARAGE = ("What is the code of the garage door?", "The garage door code is 4711.")
CAT = ("What is the name of the cat behind the garage door?", "The cat is called Tom.")


@pytest.fixture(scope="module")
def server(tmp_path_factory, scripted_server) -> Iterator[ThreadServer]:
    root = tmp_path_factory.mktemp("message-search-rerank")
    settings = memory_settings(scripted_server, generate_titles=False, chat_history_index=True, rerank_model="cohere/scripted-rerank",
                               rerank_api_base=scripted_server.root_url, rerank_api_key="scripted-key")
    live = serve_embedded(root, settings)
    yield live
    live.stop()


@pytest.fixture
async def client(server, scripted_model) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=120) as http:
        yield http


def text_of(document: Any) -> str:
    return document if isinstance(document, str) else document.get("text", "")


def cats_first(query: str, document: Any) -> float:
    """A rerank model that finds the cat turn relevant to anything and the garage turn to nothing."""
    return 0.95 if "Tom" in text_of(document) else 0.05


async def search(client: httpx.AsyncClient, q: str) -> list[dict[str, Any]]:
    response = await client.get(f"{V1}/messages/search", params={"q": q})
    assert response.status_code == 200, response.text
    return response.json()["items"]


async def indexed(client: httpx.AsyncClient, turns: int) -> None:
    """Indexing runs after `complete`, in the background: wait until every turn is searchable."""
    for _ in range(150):
        if len({item["request_id"] for item in await search(client, "garage door")}) >= turns:
            return
        await asyncio.sleep(0.2)
    raise AssertionError("the turns were never indexed")


async def test_message_search_reranks_the_turns_by_the_rerank_model(client, scripted_model):
    for question, answer in (GARAGE, CAT):
        scripted_model.on(lambda body, q=question: q in last_user_text(body), Reply.text(answer))
        sid = await new_session(client)
        await collect(client, "POST", f"{V1}/sessions/{sid}/knowledge-chat", json={"query": question, "rewrite_enabled": False})
    scripted_model.on_rerank(Reply(rank=lambda query, document: 0.5))  # while indexing: every turn passes
    await indexed(client, 2)

    scripted_model.reset()
    scripted_model.on_rerank(Reply(rank=cats_first))
    items = await search(client, "garage door code")

    assert [item["answer"] for item in items] == [CAT[1]]  # the garage turn fell below the rerank threshold
    [request] = scripted_model.rerank_requests
    assert request["query"] == "garage door code" and any("4711" in text_of(d) for d in request["documents"])
