"""The image-vector chain over HTTP (issue 14): a PDF uploaded with a multimodal embedding model
configured gets an image_vector chunk whose vector lives in the KB's image space; the search API and
the knowledge chat both recall the chart by that vector alone, keep it by the rerank image rule,
and chain it to its page's passage; the vision answering model sees the chart and cites it; and
deleting the KB drops its image space."""

from __future__ import annotations

import base64
import re
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from ragline.api.app import create_app
from ragline.services import Services
from tests.api.jobs import ingested
from tests.api.live import ThreadServer, collect
from tests.image_chain import CHART_PNG, image_chain_services, image_chain_settings, report_pdf, script_chain_vectors
from tests.image_vectors import QUESTION
from tests.scripted_model import Reply
from tests.vector_rows import vectors_dropped

V1 = "/api/v1"


@pytest.fixture(scope="module")
def served(tmp_path_factory, scripted_server) -> Iterator[tuple[ThreadServer, Services]]:
    root = tmp_path_factory.mktemp("image-vectors-api")
    settings = image_chain_settings(scripted_server, root)
    core = image_chain_services(root, settings, scripted_server)
    live = ThreadServer(create_app(settings, services=core)).start()
    yield live, core
    live.stop()


@pytest.fixture
async def client(served, scripted_model) -> AsyncIterator[httpx.AsyncClient]:
    script_chain_vectors(scripted_model)
    async with httpx.AsyncClient(base_url=served[0].url, timeout=120) as http:
        yield http


async def test_a_chart_found_by_its_own_vector_is_searched_answered_cited_and_dropped_with_its_kb(client, served, scripted_model):
    core = served[1]
    kb = (await client.post(f"{V1}/knowledge-bases", json={"name": "station-charts"})).json()["id"]
    upload = await client.post(f"{V1}/knowledge-bases/{kb}/documents", files={"file": ("report.pdf", report_pdf(), "application/pdf")})
    document = await ingested(client, upload)
    chunks = (await client.get(f"{V1}/knowledge-bases/{kb}/documents/{document['id']}/chunks")).json()["items"]
    [image_chunk] = [c for c in chunks if c["chunk_type"] == "image_vector"]

    search = {"query": QUESTION, "knowledge_base_ids": [kb], "rerank_top_k": 5}
    found = (await client.post(f"{V1}/knowledge-bases/search", json=search)).json()["items"]
    assert [(h["id"], h["match_type"], h["metadata"]["kept_by"]) for h in found] == [(image_chunk["id"], "image_vector", "image_vector")]

    scripted_model.on(lambda body: True, Reply(chunks=["The chart shows monthly bars", ' <ref id="c1"/>', "."]))
    sid = (await client.post(f"{V1}/sessions", json={"title": "charts"})).json()["id"]
    question = {"query": QUESTION, "knowledge_base_ids": [kb], "rewrite_enabled": False}
    frames = await collect(client, "POST", f"{V1}/sessions/{sid}/knowledge-chat", json=question)
    references = next(f.event["knowledge_references"] for f in frames if f.type == "references")
    assert references[0]["chunk_id"] == image_chunk["id"] and references[0]["metadata"]["kept_by"] == "image_vector"
    assert "wind vane points north" in references[0]["content"]  # merge step 4
    sent = scripted_model.requests[-1]["messages"][-1]["content"]
    chart = "data:image/png;base64," + base64.b64encode(CHART_PNG).decode()
    assert [p["image_url"]["url"] for p in sent if p.get("type") == "image_url"] == [chart]
    answer = "".join(f.event.get("content", "") for f in frames if f.type == "answer")
    assert re.search(rf'<kb [^>]*chunk_id="{image_chunk["id"]}"', answer), answer

    space = core.images.space(kb)
    assert space is not None
    assert (await client.delete(f"{V1}/knowledge-bases/{kb}")).status_code in (200, 204)
    assert vectors_dropped(core.retrieval.stores["default"].vector, space)


async def test_the_search_apis_image_rule_follows_the_requests_vector_threshold(client):
    """The rerank image rule keeps a picture whose vector score reaches max(vector_threshold, 0.25):
    the request's threshold, not the default, as the pipeline's rerank stage does."""
    kb = (await client.post(f"{V1}/knowledge-bases", json={"name": "station-charts-threshold"})).json()["id"]
    await ingested(client, await client.post(f"{V1}/knowledge-bases/{kb}/documents",
                                             files={"file": ("report.pdf", report_pdf(), "application/pdf")}))
    search = {"query": QUESTION, "knowledge_base_ids": [kb], "rerank_top_k": 5}
    [kept] = (await client.post(f"{V1}/knowledge-bases/search", json=search)).json()["items"]
    assert kept["metadata"]["kept_by"] == "image_vector" and kept["score"] < 0.99
    strict = (await client.post(f"{V1}/knowledge-bases/search", json={**search, "vector_threshold": 0.99})).json()["items"]
    assert [h for h in strict if h["match_type"] == "image_vector"] == []
