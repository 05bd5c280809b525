"""References with their location, over HTTP: a PDF and a Markdown manual uploaded, a question
asked, and each reference of the live event and of the stored message names its pages, heading
path and offsets, which point at the passage in the document's text (GET .../documents/{id}/text).
Real parsers, the local embedder, Chroma and BM25; the scripted model answers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from tests.api.jobs import ingested
from tests.api.live import ThreadServer, collect, memory_settings, serve_embedded
from tests.ingestion.pdf_fixtures import CROSSING_END, CROSSING_START, manual_pdf
from tests.scripted_model import Reply

KEYS = {"key-a": "acme", "key-b": "globex"}
V1 = "/api/v1"
GUIDE = """# Aurora guide

## Install

Mount the mast two metres above the ground.

### Pairing

Pairing the outdoor sensor takes forty seconds after its light blinks green.
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory, scripted_server) -> Iterator[ThreadServer]:
    live = serve_embedded(tmp_path_factory.mktemp("ref-locations"), memory_settings(scripted_server, api_keys=KEYS))
    yield live
    live.stop()


@pytest.fixture
async def acme(server, scripted_model) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=120, headers={"X-API-Key": "key-a"}) as client:
        yield client


async def manuals(client: httpx.AsyncClient, name: str) -> tuple[str, dict[str, str]]:
    created = await client.post(f"{V1}/knowledge-bases", json={"name": name, "chunking": {"chunk_size": 200, "chunk_overlap": 0}})
    assert created.status_code == 201, created.text
    kb = created.json()["id"]
    upload = f"{V1}/knowledge-bases/{kb}/documents"
    pdf = await ingested(client, await client.post(upload, files={"file": ("manual.pdf", manual_pdf(), "application/pdf")}))
    guide = await ingested(client, await client.post(upload, files={"file": ("guide.md", GUIDE.encode(), "text/markdown")}))
    return kb, {"pdf": pdf["id"], "guide": guide["id"]}


async def document_text(client: httpx.AsyncClient, kb: str, document: str) -> str:
    response = await client.get(f"{V1}/knowledge-bases/{kb}/documents/{document}/text")
    assert response.status_code == 200, response.text
    return response.json()["text"]


async def chunks_of(client: httpx.AsyncClient, kb: str, document: str) -> dict[str, str]:
    items = (await client.get(f"{V1}/knowledge-bases/{kb}/documents/{document}/chunks")).json()["items"]
    return {chunk["id"]: chunk["content"] for chunk in items}


async def test_references_carry_pages_heading_paths_and_offsets_into_the_documents_text(acme, scripted_model):
    scripted_model.on(lambda body: True, Reply.text('About forty seconds <ref id="c1"/>.'))
    kb, docs = await manuals(acme, "aurora-locations")
    sid = (await acme.post(f"{V1}/sessions", json={"title": "pairing"})).json()["id"]
    question = {"query": "How long does pairing take once the sensor light blinks green?", "knowledge_base_ids": [kb], "rewrite_enabled": False}
    got = await collect(acme, "POST", f"{V1}/sessions/{sid}/knowledge-chat", json=question)
    live = next(f.event["knowledge_references"] for f in got if f.type == "references")
    texts = {doc: await document_text(acme, kb, doc) for doc in docs.values()}
    crossing = next(r for r in live if CROSSING_START in r["content"] and CROSSING_END in r["content"])
    assert crossing["knowledge_id"] == docs["pdf"] and {2, 3} <= set(crossing["location"]["pages"])
    pairing = next(r for r in live if r["knowledge_id"] == docs["guide"] and "forty seconds" in r["content"])
    assert pairing["location"]["headings"] == ["Aurora guide", "Install", "Pairing"] and pairing["location"]["pages"] == []
    for reference in live:  # a passage joined from neighbouring chunks spans them all
        location, chunks = reference["location"], await chunks_of(acme, kb, reference["knowledge_id"])
        assert chunks[reference["chunk_id"]] in texts[reference["knowledge_id"]][location["start"] : location["end"]]
    passage = texts[docs["pdf"]][crossing["location"]["start"] : crossing["location"]["end"]]
    assert CROSSING_START in passage and CROSSING_END in passage
    stored = (await acme.get(f"{V1}/sessions/{sid}/messages")).json()["items"][-1]
    assert stored["knowledge_references"] == live


async def test_a_documents_text_comes_a_window_at_a_time_and_only_to_its_tenant(acme, server):
    kb, docs = await manuals(acme, "aurora-text")
    whole = (await acme.get(f"{V1}/knowledge-bases/{kb}/documents/{docs['pdf']}/text")).json()
    assert whole["offset"] == 0 and whole["total_chars"] == len(whole["text"]) and len(whole["page_starts"]) == 3
    window = (await acme.get(f"{V1}/knowledge-bases/{kb}/documents/{docs['pdf']}/text", params={"offset": 10, "limit": 20})).json()
    assert window["text"] == whole["text"][10:30] and window["offset"] == 10
    too_much = await acme.get(f"{V1}/knowledge-bases/{kb}/documents/{docs['pdf']}/text", params={"limit": 10**9})
    assert too_much.status_code == 422 and too_much.json()["error"]["message"]
    other = (await acme.post(f"{V1}/knowledge-bases", json={"name": "aurora-other"})).json()["id"]
    assert (await acme.get(f"{V1}/knowledge-bases/{other}/documents/{docs['pdf']}/text")).status_code == 404  # not that base's document
    async with httpx.AsyncClient(base_url=server.url, timeout=60, headers={"X-API-Key": "key-b"}) as globex:
        assert (await globex.get(f"{V1}/knowledge-bases/{kb}/documents/{docs['pdf']}/text")).status_code == 404
