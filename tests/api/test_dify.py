"""Dify's External Knowledge API (`POST /retrieval`) against a real service and a real knowledge base.

The requests, responses and errors are those of Dify's specification (docs.dify.ai, "External
Knowledge API"), copied with only the knowledge_id adapted; the knowledge base and its documents
are made through the REST API, searched with the local embedder.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from tests.api.live import ThreadServer, memory_settings, serve_embedded

KEYS = {"key-a": "acme", "key-b": "globex"}
V1 = "/api/v1"
DOCUMENTS = {  # file name -> text (uploads keep their file name as the source)
    "knowledge.txt": "This is the document for external knowledge. Dify reads it through the External Knowledge API.",
    "introduce.txt": "Dify: The Innovation Engine for GenAI Applications. Dify is an open-source platform to build LLM apps.",
    "kettle.md": "The Aurora kettle has a warranty of two years. Descale it every month with citric acid.",
}
SPEC_ERRORS = {  # the specification's error codes, with its texts
    1001: "Invalid Authorization header format. Expected 'Bearer <api-key>' format.",
    1002: "Authorization failed. Please check your API key.",
    2001: "The knowledge does not exist",
}


def _ingest(client: httpx.Client, kb: str, name: str, text: str) -> dict[str, Any]:
    accepted = client.post(f"{V1}/knowledge-bases/{kb}/documents", files={"file": (name, text.encode(), "text/plain")})
    assert accepted.status_code == 202, accepted.text
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        job = client.get(accepted.headers["location"]).json()
        if job["state"] in ("done", "failed", "canceled"):
            assert job["state"] == "done", job
            return job["document"]
        time.sleep(0.1)
    raise AssertionError("the ingestion job did not finish")


@pytest.fixture(scope="module")
def service(tmp_path_factory) -> Iterator[tuple[ThreadServer, str, dict[str, str]]]:
    """The service, acme's knowledge base "dify-docs" (its id) and its documents' ids by file name."""
    live = serve_embedded(tmp_path_factory.mktemp("dify"), memory_settings(api_keys=KEYS))
    try:
        with httpx.Client(base_url=live.url, timeout=120, headers={"X-API-Key": "key-a"}) as acme:
            created = acme.post(f"{V1}/knowledge-bases", json={"name": "dify-docs"})
            assert created.status_code == 201, created.text
            kb = created.json()["id"]
            documents = {name: _ingest(acme, kb, name, text)["id"] for name, text in DOCUMENTS.items()}
        yield live, kb, documents
    finally:
        live.stop()


@pytest.fixture
async def dify(service) -> AsyncIterator[httpx.AsyncClient]:
    """A client as Dify is one: the endpoint URL, and the API key as a Bearer token."""
    async with httpx.AsyncClient(base_url=service[0].url, timeout=120, headers={"Authorization": "Bearer key-a"}) as client:
        yield client


def records_of(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"records"}
    for record in body["records"]:
        assert set(record) == {"content", "score", "title", "metadata"}
        assert isinstance(record["content"], str) and record["content"]
        assert isinstance(record["title"], str) and record["title"]
        assert 0 <= record["score"] <= 1
        assert isinstance(record["metadata"], dict)  # an object, never null: null breaks Dify's pipeline
    return body["records"]


async def test_the_specifications_example_request_gets_records(dify, service):
    _, kb, _ = service
    example = {  # "Example Request" of the specification
        "knowledge_id": kb,
        "query": "What is Dify?",
        "retrieval_setting": {
            "top_k": 3,
            "score_threshold": 0.5,
        },
    }
    records = records_of(await dify.post("/retrieval", json=example))
    assert 1 <= len(records) <= 3
    assert all(r["score"] >= 0.5 for r in records)
    assert [r["score"] for r in records] == sorted((r["score"] for r in records), reverse=True)
    assert "Innovation Engine" in records[0]["content"] and records[0]["title"] == "introduce"
    assert records[0]["metadata"]["file_name"] == "introduce.txt" and records[0]["metadata"]["chunk_id"]


async def test_the_older_request_syntax_with_a_knowledge_base_name(dify):
    request = {  # "Request Syntax" of the specification's earlier edition; the knowledge base by name
        "knowledge_id": "dify-docs",
        "query": "your question",
        "retrieval_setting": {
            "top_k": 2,
            "score_threshold": 0.5,
        },
    }
    records = records_of(await dify.post("/retrieval", json=request))
    assert len(records) <= 2 and all(r["score"] >= 0.5 for r in records)


async def test_the_specifications_error_codes_and_statuses(dify, service):
    live, kb, _ = service
    ask = {"knowledge_id": kb, "query": "What is Dify?", "retrieval_setting": {"top_k": 3, "score_threshold": 0.5}}
    async with httpx.AsyncClient(base_url=live.url, timeout=60) as bare:
        cases = [
            (await bare.post("/retrieval", json=ask), 403, 1001),
            (await bare.post("/retrieval", json=ask, headers={"Authorization": "Basic a2V5LWE="}), 403, 1001),
            (await bare.post("/retrieval", json=ask, headers={"Authorization": "Bearer"}), 403, 1001),
            (await bare.post("/retrieval", json=ask, headers={"Authorization": "Bearer not-a-key"}), 403, 1002),
            (await dify.post("/retrieval", json={**ask, "knowledge_id": "AAA-BBB-CCC"}), 404, 2001),
        ]
    for response, status, code in cases:
        assert response.status_code == status, response.text
        assert response.json() == {"error_code": code, "error_msg": SPEC_ERRORS[code]}


async def test_difys_connection_check_passes_with_a_good_key_and_fails_with_a_bad_one(service):
    """Dify saves an External Knowledge API after a POST to {endpoint}/retrieval without a body: it
    refuses the endpoint on 404 (not found), 403 (authorization failed) or 502."""
    live, _, _ = service
    async with httpx.AsyncClient(base_url=live.url, timeout=60) as dify_check:
        good = await dify_check.post("/retrieval", headers={"Authorization": "Bearer key-a"})
        bad = await dify_check.post("/retrieval", headers={"Authorization": "Bearer not-a-key"})
    assert good.status_code not in (403, 404, 502) and good.status_code < 500
    assert good.json()["error_code"] == 3001 and good.json()["error_msg"]
    assert bad.status_code == 403 and bad.json()["error_code"] == 1002


async def test_top_k_and_score_threshold_are_honoured(dify, service):
    _, kb, _ = service

    async def ask(top_k: int, threshold: float) -> list[dict[str, Any]]:
        body = {"knowledge_id": kb, "query": "What is Dify?", "retrieval_setting": {"top_k": top_k, "score_threshold": threshold}}
        return records_of(await dify.post("/retrieval", json=body))

    everything = await ask(10, 0.0)
    assert len(everything) == len(DOCUMENTS)  # one chunk each, all above 0
    assert len(await ask(1, 0.0)) == 1 and len(await ask(2, 0.0)) == 2
    scores = sorted({r["score"] for r in everything}, reverse=True)
    assert len(scores) >= 2, scores
    between = (scores[0] + scores[1]) / 2  # keeps the best record only
    strict = await ask(10, between)
    assert [r["content"] for r in strict] == [everything[0]["content"]]
    assert await ask(10, 1.0) == [] or all(r["score"] == 1.0 for r in await ask(10, 1.0))


async def test_another_tenant_cannot_read_the_knowledge_base(service):
    live, kb, _ = service
    async with httpx.AsyncClient(base_url=live.url, timeout=60, headers={"Authorization": "Bearer key-b"}) as globex:
        for knowledge_id in (kb, "dify-docs"):
            body = {"knowledge_id": knowledge_id, "query": "What is Dify?", "retrieval_setting": {"top_k": 3, "score_threshold": 0.0}}
            response = await globex.post("/retrieval", json=body)
            assert response.status_code == 404 and response.json() == {"error_code": 2001, "error_msg": SPEC_ERRORS[2001]}
            assert "Innovation" not in response.text
        # globex's own base of the same name is its own: the name resolves within the caller's tenant
        created = await globex.post(f"{V1}/knowledge-bases", json={"name": "dify-docs"}, headers={"X-API-Key": "key-b"})
        assert created.status_code == 201, created.text
        own = await globex.post("/retrieval", json={"knowledge_id": "dify-docs", "query": "What is Dify?",
                                                    "retrieval_setting": {"top_k": 3, "score_threshold": 0.0}})
        assert records_of(own) == []


async def ask_filtered(dify: httpx.AsyncClient, kb: str, condition: dict[str, Any]) -> list[dict[str, Any]]:
    body = {"knowledge_id": kb, "query": "What is Dify?", "retrieval_setting": {"top_k": 10, "score_threshold": 0.0},
            "metadata_condition": condition}
    return records_of(await dify.post("/retrieval", json=body))


def names(records: list[dict[str, Any]]) -> set[str]:
    return {r["metadata"]["file_name"] for r in records}


async def test_a_metadata_condition_filters_on_what_the_documents_carry(dify, service):
    _, kb, documents = service
    one = {"conditions": [{"name": "title", "comparison_operator": "is", "value": "kettle"}]}
    assert names(await ask_filtered(dify, kb, one)) == {"kettle.md"}  # found although the query is about Dify
    txt = {"conditions": [{"name": "file_name", "comparison_operator": "end with", "value": ".txt"}]}
    assert names(await ask_filtered(dify, kb, txt)) == {"knowledge.txt", "introduce.txt"}
    both = {"logical_operator": "and", "conditions": [txt["conditions"][0], {"name": "title", "comparison_operator": "not contains", "value": "INTRO"}]}
    assert names(await ask_filtered(dify, kb, both)) == {"knowledge.txt"}
    either = {"logical_operator": "or", "conditions": [one["conditions"][0], {"name": "document_id", "comparison_operator": "in",
                                                                               "value": [documents["introduce.txt"]]}]}
    assert names(await ask_filtered(dify, kb, either)) == {"kettle.md", "introduce.txt"}
    assert names(await ask_filtered(dify, kb, {"conditions": [{"name": "tags", "comparison_operator": "empty"}]})) == set(DOCUMENTS)
    assert await ask_filtered(dify, kb, {"conditions": [{"name": "no-such-field", "comparison_operator": "not empty"}]}) == []
    future = int(time.time()) + 86_400  # Dify's time metadata: Unix seconds
    assert names(await ask_filtered(dify, kb, {"conditions": [{"name": "created_at", "comparison_operator": "before", "value": future}]})) == set(DOCUMENTS)
    assert await ask_filtered(dify, kb, {"conditions": [{"name": "created_at", "comparison_operator": "after", "value": future}]}) == []
    assert names(await ask_filtered(dify, kb, {"conditions": [{"name": "chunk_count", "comparison_operator": "≥", "value": 1}]})) == set(DOCUMENTS)


async def test_faq_tags_can_be_filtered(dify):
    async with httpx.AsyncClient(base_url=str(dify.base_url), timeout=60, headers={"X-API-Key": "key-a"}) as acme:
        kb = (await acme.post(f"{V1}/knowledge-bases", json={"name": "dify-faq", "type": "faq"})).json()["id"]
        entries = [{"standard_question": "How do I pay the invoice?", "answers": ["By card."], "tags": ["billing"]},
                   {"standard_question": "When does my parcel arrive?", "answers": ["In two days."], "tags": ["shipping"]}]
        assert (await acme.post(f"{V1}/knowledge-bases/{kb}/faq", json={"entries": entries})).status_code == 200
    billing = await ask_filtered(dify, kb, {"conditions": [{"name": "tags", "comparison_operator": "contains", "value": "bill"}]})
    assert [r["metadata"]["tags"] for r in billing] == [["billing"]]
    others = await ask_filtered(dify, kb, {"conditions": [{"name": "tags", "comparison_operator": "not in", "value": ["billing"]}]})
    assert [r["metadata"]["tags"] for r in others] == [["shipping"]]


async def test_a_condition_ragline_cannot_evaluate_is_a_clear_400(dify, service):
    _, kb, _ = service
    cases = [
        ({"name": "title", "comparison_operator": "sounds like", "value": "x"}, "sounds like"),
        ({"name": "chunk_count", "comparison_operator": ">", "value": "many"}, "needs a number"),
        ({"name": "created_at", "comparison_operator": "before", "value": "yesterday"}, "needs a date"),
        ({"name": "title", "comparison_operator": "contains"}, "needs one value"),
    ]
    for condition, words in cases:
        body = {"knowledge_id": kb, "query": "q", "retrieval_setting": {"top_k": 1, "score_threshold": 0},
                "metadata_condition": {"conditions": [condition]}}
        response = await dify.post("/retrieval", json=body)
        assert response.status_code == 400, response.text
        assert response.json()["error_code"] == 3001 and words in response.json()["error_msg"]


async def test_bad_bodies_are_4xx_in_difys_shape(dify, service):
    _, kb, _ = service
    ok = {"knowledge_id": kb, "query": "q", "retrieval_setting": {"top_k": 1, "score_threshold": 0}}
    cases = [
        (await dify.post("/retrieval", content=b"{not json", headers={"content-type": "application/json"}), 400),
        (await dify.post("/retrieval", json={**ok, "retrieval_setting": {"top_k": 0, "score_threshold": 0}}), 422),
        (await dify.post("/retrieval", json={**ok, "retrieval_setting": {"top_k": 1, "score_threshold": 2}}), 422),
        (await dify.post("/retrieval", json={**ok, "query": "   "}), 422),
        (await dify.post("/retrieval", json={"query": "q"}), 422),
        (await dify.post("/retrieval", content=b"x" * 2_000_000, headers={"content-type": "application/json"}), 413),
    ]
    for response, status in cases:
        assert response.status_code == status, response.text
        assert response.json()["error_code"] == 3001 and response.json()["error_msg"]
