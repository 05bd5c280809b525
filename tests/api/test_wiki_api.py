"""Wiki pages over HTTP (issue 14, "done when"): a wiki-enabled knowledge base gets pages written by
the (scripted) chat model in the background; a question whose answer spans two documents retrieves
their shared page, boosted x1.3; deleting a document rewrites its page; a base without the wiki
gets none; a failing model is reported and writes nothing."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from ragline import defaults
from tests.api.jobs import ingested
from tests.api.live import ThreadServer, collect, memory_settings, serve_embedded
from tests.scripted_model import Reply, last_user_text, system_text

V1 = "/api/v1"
PAIRING = ("Pairing the Aurora sensor", "To pair the Aurora outdoor sensor with the base station, hold its SYNC button "
           "for five seconds. Pairing takes about two minutes.")
BATTERY = ("Aurora sensor battery", "The Aurora outdoor sensor runs on two AA lithium batteries, which last about "
           "eighteen months in cold weather.")
BREAD = ("Sourdough bread", "Mix flour, water and starter, let the dough rise overnight, then bake it at 230 degrees for forty minutes.")
AURORA_PAGE = ("The Aurora outdoor sensor pairs with the base station in about two minutes after its SYNC button is held "
               "for five seconds, and it runs on two AA lithium batteries that last about eighteen months.")
PAIRING_PAGE = "Holding SYNC for five seconds pairs the Aurora outdoor sensor with the base station in about two minutes."
BREAD_PAGE = "Sourdough rises overnight and bakes at 230 degrees for forty minutes."
QUESTION = "How long does pairing the Aurora sensor take, and which batteries does it run on?"


@pytest.fixture(scope="module")
def server(tmp_path_factory, scripted_server) -> Iterator[ThreadServer]:
    root = tmp_path_factory.mktemp("wiki-api")
    settings = memory_settings(scripted_server, data_dir=root)
    live = serve_embedded(root, settings)
    yield live
    live.stop()


@pytest.fixture
async def client(server, scripted_model) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=120) as http:
        yield http


def is_wiki_prompt(body: dict[str, Any]) -> bool:
    return "You write wiki pages" in system_text(body)


def script_pages(scripted_model) -> None:
    """The scripted model writes the page its documents call for (the prompt holds their text)."""
    scripted_model.on(lambda b: is_wiki_prompt(b) and "eighteen months" in last_user_text(b), Reply.text(AURORA_PAGE))
    scripted_model.on(lambda b: is_wiki_prompt(b) and "SYNC" in last_user_text(b), Reply.text(PAIRING_PAGE))
    scripted_model.on(lambda b: is_wiki_prompt(b) and "Sourdough" in last_user_text(b), Reply.text(BREAD_PAGE))


def wiki_calls(scripted_model) -> int:
    return sum(1 for body in scripted_model.requests if is_wiki_prompt(body))


async def add(client: httpx.AsyncClient, kb: str, doc: tuple[str, str]) -> dict[str, Any]:
    accepted = await client.post(f"{V1}/knowledge-bases/{kb}/documents/text", json={"title": doc[0], "text": doc[1], "source": doc[0]})
    return await ingested(client, accepted)  # an ingestion job: the wiki rebuild starts once it stored the document


async def settled(client: httpx.AsyncClient, kb: str, after: str | None = None) -> dict[str, Any]:
    """The wiki status once no rebuild runs and one finished (after `after`, when given)."""
    for _ in range(300):  # 30 s: a rebuild here takes well under 5
        status = (await client.get(f"{V1}/knowledge-bases/{kb}/wiki")).json()
        if status["state"] != "building" and status["finished_at"] and status["finished_at"] != after:
            return status
        await asyncio.sleep(0.1)
    raise AssertionError(f"the wiki of {kb} did not settle: {status}")


async def pages(client: httpx.AsyncClient, kb: str) -> dict[str, dict[str, Any]]:
    """Wiki page documents by title, each with its chunks."""
    docs = (await client.get(f"{V1}/knowledge-bases/{kb}/documents")).json()["items"]
    out = {}
    for doc in docs:
        if doc["file_type"] == "wiki":
            doc["chunks"] = (await client.get(f"{V1}/knowledge-bases/{kb}/documents/{doc['id']}/chunks")).json()["items"]
            out[doc["title"]] = doc
    return out


async def wiki_kb(client: httpx.AsyncClient, name: str) -> str:
    created = await client.post(f"{V1}/knowledge-bases", json={"name": name, "wiki_enabled": True})
    assert created.status_code == 201 and created.json()["wiki_enabled"] is True, created.text
    return created.json()["id"]


async def ask(client: httpx.AsyncClient, kb: str) -> list[dict[str, Any]]:
    sid = (await client.post(f"{V1}/sessions", json={"title": "wiki"})).json()["id"]
    question = {"query": QUESTION, "knowledge_base_ids": [kb], "rewrite_enabled": False}
    got = await collect(client, "POST", f"{V1}/sessions/{sid}/knowledge-chat", json=question)
    return next(f.event["knowledge_references"] for f in got if f.type == "references")


async def test_a_wiki_kb_gets_topic_pages_that_answer_across_documents_and_are_boosted(client, scripted_model, monkeypatch):
    script_pages(scripted_model)
    kb = await wiki_kb(client, "station-wiki")
    for doc in (PAIRING, BATTERY, BREAD):
        await add(client, kb, doc)
    status = await settled(client, kb)
    assert status["state"] == "ok" and status["pages"] == 2 and status["failed"] == {}, status

    written = await pages(client, kb)
    aurora = written["Aurora sensor battery / Pairing the Aurora sensor"]  # the two Aurora documents share one page
    assert set(written) == {"Aurora sensor battery / Pairing the Aurora sensor", "Sourdough bread"}
    [chunk] = aurora["chunks"]
    slug = aurora["metadata"]["slug"]
    assert chunk["chunk_type"] == "wiki_page" and chunk["content"].startswith(AURORA_PAGE)
    assert re.fullmatch(r"summary/[0-9a-f-]{36}", slug) and f"[[{slug}|" in chunk["content"]
    prompt = next(b for b in scripted_model.requests if is_wiki_prompt(b) and "eighteen months" in last_user_text(b))
    assert "SYNC button" in last_user_text(prompt)  # both documents were read for the shared page

    for only in ({"disable_keyword": True}, {"disable_vector": True}):  # found by vector search, and by keyword search
        found = (await client.post(f"{V1}/knowledge-bases/search", json={"query": QUESTION, "knowledge_base_ids": [kb], **only})).json()
        assert chunk["id"] in [hit["id"] for hit in found["items"]], (only, found)

    calls = wiki_calls(scripted_model)
    boosted = await ask(client, kb)
    page = next(r for r in boosted if r["chunk_id"] == chunk["id"])
    assert boosted[0]["chunk_id"] == chunk["id"] and page["metadata"].get("wiki_boosted") is True
    prompt = str(scripted_model.requests[-1]["messages"])
    assert AURORA_PAGE in prompt and slug not in prompt and re.search(r"\[\[res://\d{4}\|", prompt)  # the slug reaches the model as res://

    monkeypatch.setattr(defaults, "WIKI_BOOST_FACTOR", 1.0)  # the same question without the boost
    plain = await ask(client, kb)
    unboosted = next(r for r in plain if r["chunk_id"] == chunk["id"])
    assert plain[0]["chunk_id"] != chunk["id"]  # unboosted, a raw chunk outranks the page; boosted, the page leads
    assert page["score"] == pytest.approx(unboosted["score"] * 1.3, rel=1e-3)
    assert wiki_calls(scripted_model) == calls  # answering wrote no page


async def test_deleting_a_document_rewrites_its_page_and_leaves_the_others(client, scripted_model):
    script_pages(scripted_model)
    kb = await wiki_kb(client, "station-wiki-delete")
    pairing, battery, _ = [await add(client, kb, doc) for doc in (PAIRING, BATTERY, BREAD)]
    first = await settled(client, kb)
    before = await pages(client, kb)
    calls = wiki_calls(scripted_model)

    rebuilt = await client.post(f"{V1}/knowledge-bases/{kb}/wiki/rebuild")  # nothing changed: nothing is rewritten
    assert rebuilt.status_code == 202
    again = await settled(client, kb, after=first["finished_at"])
    assert again["unchanged"] == 2 and again["written"] == [] and wiki_calls(scripted_model) == calls

    assert (await client.delete(f"{V1}/knowledge-bases/{kb}/documents/{battery['id']}")).status_code == 204
    status = await settled(client, kb, after=again["finished_at"])
    assert status["written"] == ["Pairing the Aurora sensor"] and status["removed"] == 1 and status["unchanged"] == 1, status
    after = await pages(client, kb)
    assert set(after) == {"Pairing the Aurora sensor", "Sourdough bread"}
    assert after["Sourdough bread"]["id"] == before["Sourdough bread"]["id"]
    assert after["Pairing the Aurora sensor"]["metadata"]["sources"] == [pairing["id"]]
    refused = await client.post(f"{V1}/knowledge-bases/{kb}/documents/{after['Sourdough bread']['id']}/reparse")
    assert refused.status_code == 400 and "wiki page" in refused.text  # re-chunking would make the page text chunks
    found = (await client.post(f"{V1}/knowledge-bases/search", json={"query": "AA lithium batteries eighteen months", "knowledge_base_ids": [kb]})).json()
    assert not any("eighteen months" in hit["content"] for hit in found["items"])  # the deleted document's facts left the wiki too


async def test_a_kb_without_the_wiki_gets_no_pages_until_it_is_enabled(client, scripted_model):
    script_pages(scripted_model)
    created = await client.post(f"{V1}/knowledge-bases", json={"name": "no-wiki"})
    kb = created.json()["id"]
    assert created.json()["wiki_enabled"] is False
    await add(client, kb, BREAD)
    status = (await client.get(f"{V1}/knowledge-bases/{kb}/wiki")).json()
    assert status["state"] == "idle" and status["pages"] == 0 and wiki_calls(scripted_model) == 0

    enabled = await client.patch(f"{V1}/knowledge-bases/{kb}", json={"wiki_enabled": True})
    assert enabled.json()["wiki_enabled"] is True
    status = await settled(client, kb)
    assert status["pages"] == 1 and list(await pages(client, kb)) == ["Sourdough bread"]

    await client.patch(f"{V1}/knowledge-bases/{kb}", json={"wiki_enabled": False})
    status = await settled(client, kb, after=status["finished_at"])
    assert status["pages"] == 0 and status["removed"] == 1 and status["enabled"] is False


async def test_a_failing_model_is_reported_per_page_and_writes_nothing(client, scripted_model):
    scripted_model.on(lambda b: is_wiki_prompt(b) and "Sourdough" in last_user_text(b), Reply(status=400, error="scripted refusal"))
    kb = await wiki_kb(client, "failing-wiki")
    await add(client, kb, BREAD)
    status = await settled(client, kb)
    assert status["state"] == "failed" and status["pages"] == 0
    assert "scripted refusal" in status["failed"]["Sourdough bread"]
    assert list(await pages(client, kb)) == []
