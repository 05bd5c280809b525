"""Knowledge over HTTP: knowledge bases, documents, chunks, FAQ, hybrid search, a cited answer,
and tenant isolation on every knowledge route. Uses the real local embedder (vectors cached)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from ragline.api.app import ROUTES
from tests.api.jobs import finished, ingested
from tests.api.live import ThreadServer, collect, memory_settings, serve_embedded, types
from tests.scripted_model import Reply

KEYS = {"key-a": "acme", "key-b": "globex"}
V1 = "/api/v1"
WARRANTY = "The Aurora kettle has a warranty of two years. Keep the receipt to claim the warranty."
DESCALING = "Descale the Aurora kettle every month with citric acid to remove limescale."


@pytest.fixture(scope="module")
def server(tmp_path_factory, scripted_server) -> Iterator[ThreadServer]:
    root = tmp_path_factory.mktemp("kb-api")
    settings = memory_settings(scripted_server, api_keys=KEYS)
    live = serve_embedded(root, settings)
    yield live
    live.stop()


@pytest.fixture
async def acme(server, scripted_model) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=120, headers={"X-API-Key": "key-a"}) as client:
        yield client


@pytest.fixture
async def globex(server, scripted_model) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=120, headers={"X-API-Key": "key-b"}) as client:
        yield client


async def kettle_kb(client: httpx.AsyncClient, name: str) -> tuple[str, str]:
    created = await client.post(f"{V1}/knowledge-bases", json={"name": name, "description": "kettle manual"})
    assert created.status_code == 201, created.text
    kb = created.json()["id"]
    doc = await ingested(client, await client.post(f"{V1}/knowledge-bases/{kb}/documents/text", json={"text": WARRANTY, "title": "Warranty"}))
    await ingested(client, await client.post(f"{V1}/knowledge-bases/{kb}/documents", files={"file": ("descaling.md", DESCALING.encode(), "text/markdown")}))
    return kb, doc["id"]


async def test_documents_are_added_listed_chunked_searched_reparsed_and_deleted(acme):
    kb, doc = await kettle_kb(acme, "kettle")
    titles = sorted(d["title"] for d in (await acme.get(f"{V1}/knowledge-bases/{kb}/documents")).json()["items"])
    assert titles == ["Warranty", "descaling"]
    chunks = (await acme.get(f"{V1}/knowledge-bases/{kb}/documents/{doc}/chunks")).json()["items"]
    assert chunks and "two years" in chunks[0]["content"]
    found = await acme.post(f"{V1}/knowledge-bases/search", json={"query": "how long is the warranty", "knowledge_base_ids": [kb]})
    assert found.status_code == 200 and found.json()["items"][0]["knowledge_id"] == doc
    assert (await acme.post(f"{V1}/knowledge-bases/{kb}/documents/{doc}/reparse")).status_code == 200
    assert (await acme.delete(f"{V1}/knowledge-bases/{kb}/documents/{doc}")).status_code == 204
    assert (await acme.get(f"{V1}/knowledge-bases/{kb}/documents/{doc}/chunks")).status_code == 404
    renamed = await acme.patch(f"{V1}/knowledge-bases/{kb}", json={"name": "kettle-2"})
    assert renamed.json()["name"] == "kettle-2"
    assert (await acme.delete(f"{V1}/knowledge-bases/{kb}")).status_code == 204
    assert (await acme.get(f"{V1}/knowledge-bases/{kb}")).status_code == 404


async def test_bad_knowledge_input_is_4xx(acme):
    kb, _ = await kettle_kb(acme, "kettle-bad-input")
    cases = [
        (await acme.post(f"{V1}/knowledge-bases", json={"name": ""}), 422),
        (await acme.post(f"{V1}/knowledge-bases", json={"name": "kettle-bad-input"}), 409),
        (await acme.post(f"{V1}/knowledge-bases", json={"name": "x", "type": "video"}), 422),
        (await acme.post(f"{V1}/knowledge-bases/{kb}/documents", files={"file": ("movie.mp4", b"\x00", "video/mp4")}), 400),
        (await acme.post(f"{V1}/knowledge-bases/{kb}/documents", json={"text": "not multipart"}), 400),
        (await acme.post(f"{V1}/knowledge-bases/{kb}/faq", json={"entries": [{"standard_question": "q", "answers": ["a"]}]}), 400),
        (await acme.post(f"{V1}/knowledge-bases/search", json={"query": "q", "knowledge_base_ids": []}), 422),
        (await acme.post(f"{V1}/knowledge-bases/search", json={"query": "q", "knowledge_base_ids": ["nope"]}), 404),
    ]
    for response, status in cases:
        assert response.status_code == status, response.text
        assert response.json()["error"]["message"]


async def test_faq_entries_are_upserted_imported_and_listed(acme):
    created = await acme.post(f"{V1}/knowledge-bases", json={"name": "kettle-faq", "type": "faq"})
    kb = created.json()["id"]
    entries = [{"standard_question": "Is the kettle dishwasher safe?", "answers": ["No, wipe it clean."]}]
    assert (await acme.post(f"{V1}/knowledge-bases/{kb}/faq", json={"entries": entries})).status_code == 200
    rows = json.dumps([{"standard_question": "What voltage does it use?", "answers": ["230 V"]}, {"answers": ["orphan"]}])
    dry = await acme.post(f"{V1}/knowledge-bases/{kb}/faq/import", params={"dry_run": "true"}, files={"file": ("faq.json", rows.encode())})
    assert dry.json()["accepted"] == 1 and len(dry.json()["rejected"]) == 1 and dry.json()["imported"] == 0
    real = await acme.post(f"{V1}/knowledge-bases/{kb}/faq/import", files={"file": ("faq.json", rows.encode())})
    assert real.json()["imported"] == 1
    listed = (await acme.get(f"{V1}/knowledge-bases/{kb}/faq")).json()["items"]
    assert sorted(e["standard_question"] for e in listed) == ["Is the kettle dishwasher safe?", "What voltage does it use?"]


async def test_faq_entries_are_listed_a_page_at_a_time(acme):
    kb = (await acme.post(f"{V1}/knowledge-bases", json={"name": "paged-faq", "type": "faq"})).json()["id"]
    entries = [{"standard_question": f"Question number {i}?", "answers": [f"Answer {i}."]} for i in range(7)]
    assert (await acme.post(f"{V1}/knowledge-bases/{kb}/faq", json={"entries": entries})).status_code == 200
    pages = [(await acme.get(f"{V1}/knowledge-bases/{kb}/faq", params={"page": n, "page_size": 3})).json() for n in (1, 2, 3, 4)]
    assert [len(page["items"]) for page in pages] == [3, 3, 1, 0] and {page["total"] for page in pages} == {7}
    assert len({e["id"] for page in pages for e in page["items"]}) == 7  # every entry once
    default = (await acme.get(f"{V1}/knowledge-bases/{kb}/faq")).json()
    assert default["page_size"] == 100 and len(default["items"]) == 7
    too_big = await acme.get(f"{V1}/knowledge-bases/{kb}/faq", params={"page_size": 501})
    assert too_big.status_code == 422 and "500" in too_big.json()["error"]["message"]


async def test_knowledge_chat_sends_the_references_before_the_answer(acme, scripted_model):
    scripted_model.on(lambda b: True, Reply.text("Two years."))
    kb, _ = await kettle_kb(acme, "kettle-chat")
    sid = (await acme.post(f"{V1}/sessions", json={"title": "kettle"})).json()["id"]
    question = {"query": "How long is the kettle warranty?", "knowledge_base_ids": [kb], "rewrite_enabled": False}
    got = await collect(acme, "POST", f"{V1}/sessions/{sid}/knowledge-chat", json=question)
    kinds = types(got)
    assert kinds[0] == "agent_query" and kinds[-1] == "complete"
    assert "references" in kinds and kinds.index("references") < kinds.index("answer")
    references = next(f.event["knowledge_references"] for f in got if f.type == "references")
    assert any("two years" in r.get("content", "") for r in references)


async def test_a_stored_answer_lists_the_references_its_stream_sent_with_their_titles(acme, scripted_model):
    scripted_model.on(lambda b: True, Reply.text('Two years <ref id="c1"/>.'))
    kb, doc = await kettle_kb(acme, "kettle-reopened")
    sid = (await acme.post(f"{V1}/sessions", json={"title": "kettle"})).json()["id"]
    question = {"query": "How long is the kettle warranty?", "knowledge_base_ids": [kb], "rewrite_enabled": False}
    got = await collect(acme, "POST", f"{V1}/sessions/{sid}/knowledge-chat", json=question)
    live = next(f.event["knowledge_references"] for f in got if f.type == "references")
    stored = (await acme.get(f"{V1}/sessions/{sid}/messages")).json()["items"][-1]
    assert stored["knowledge_references"] == live  # what a reopened conversation cites is what the live answer cited
    warranty = next(r for r in stored["knowledge_references"] if r["knowledge_id"] == doc)
    assert warranty["title"] == "Warranty" and f'chunk_id="{warranty["chunk_id"]}"' in stored["content"]


def knowledge_requests(kb: str, doc: str, job: str = "JOB") -> list[tuple[str, str, dict]]:
    base = f"{V1}/knowledge-bases/{kb}"
    return [
        ("GET", base, {}),
        ("PATCH", base, {"json": {"name": "stolen"}}),
        ("DELETE", base, {}),
        ("PUT", f"{base}/access", {"json": {"users": ["spy"]}}),
        ("PUT", f"{base}/documents/{doc}/access", {"json": {}}),
        ("GET", f"{base}/documents", {}),
        ("POST", f"{base}/documents", {"files": {"file": ("x.txt", b"planted")}}),
        ("POST", f"{base}/documents/text", {"json": {"text": "planted"}}),
        ("DELETE", f"{base}/documents/{doc}", {}),
        ("POST", f"{base}/documents/{doc}/reparse", {}),
        ("GET", f"{base}/documents/{doc}/chunks", {}),
        ("GET", f"{base}/documents/{doc}/text", {}),
        ("GET", f"{base}/faq", {}),
        ("POST", f"{base}/faq", {"json": {"entries": [{"standard_question": "q", "answers": ["a"]}]}}),
        ("POST", f"{base}/faq/import", {"files": {"file": ("f.json", b"[]")}}),
        ("GET", f"{base}/jobs/{job}", {}),
        ("DELETE", f"{base}/jobs/{job}", {}),
        ("POST", f"{base}/jobs/{job}/cancel", {}),
        ("GET", f"{base}/jobs/{job}/events", {}),
        ("GET", f"{base}/wiki", {}),
        ("POST", f"{base}/wiki/rebuild", {}),
    ]


def test_the_isolation_table_covers_every_knowledge_base_route():
    covered = {(m, p.replace("KB", "{kb_id}").replace("DOC", "{document_id}").replace("JOB", "{job_id}")) for m, p, _ in knowledge_requests("KB", "DOC")}
    routes = {(m, r.path) for r in ROUTES for m in (r.methods or ()) if m != "HEAD" and "{kb_id}" in r.path}
    assert routes == covered


async def test_another_tenant_reaches_no_knowledge_base_of_ours(acme, globex):
    kb, doc = await kettle_kb(acme, "kettle-private")
    planted_job = await acme.post(f"{V1}/knowledge-bases/{kb}/documents/text", json={"text": WARRANTY, "source": "warranty-again"})
    job = (await finished(acme, planted_job))["id"]
    for method, url, kwargs in knowledge_requests(kb, doc, job):
        response = await globex.request(method, url, **kwargs)
        assert response.status_code == 404, (method, url, response.status_code, response.text)
        assert "two years" not in response.text
    assert kb not in [k["id"] for k in (await globex.get(f"{V1}/knowledge-bases")).json()["items"]]
    search = await globex.post(f"{V1}/knowledge-bases/search", json={"query": "warranty", "knowledge_base_ids": [kb]})
    assert search.status_code == 404
    by_document = await globex.post(f"{V1}/knowledge-bases/search", json={"query": "warranty", "knowledge_base_ids": ["x"], "knowledge_ids": [doc]})
    assert by_document.status_code == 404
    sid = (await globex.post(f"{V1}/sessions", json={"title": "spy"})).json()["id"]
    for question in ({"query": "warranty?", "knowledge_base_ids": [kb]}, {"query": "warranty?", "knowledge_ids": [doc]},
                     {"query": "warranty?", "search_targets": [{"knowledge_base_id": kb}]}):
        asked = await globex.post(f"{V1}/sessions/{sid}/knowledge-chat", json=question)
        assert asked.status_code == 404, asked.text
    mine = (await acme.get(f"{V1}/knowledge-bases/{kb}/documents")).json()["items"]
    assert len(mine) == 3  # nothing was planted or deleted (the two of kettle_kb and the job's)
    assert (await acme.get(f"{V1}/knowledge-bases/{kb}/jobs/{job}")).json()["state"] == "done"  # nor canceled


@pytest.mark.parametrize("name", [".", "..", "fa\x00q.json", "x" * 300 + ".json", "..\\..\\faq.json"])
async def test_hostile_faq_file_names_never_cause_a_server_error(acme, name):
    created = await acme.post(f"{V1}/knowledge-bases", json={"name": f"faq-names-{abs(hash(name))}", "type": "faq"})
    kb = created.json()["id"]
    rows = json.dumps([{"standard_question": "Is it safe?", "answers": ["Yes."]}]).encode()
    response = await acme.post(f"{V1}/knowledge-bases/{kb}/faq/import", params={"dry_run": "true"}, files={"file": (name, rows)})
    if name in (".", ".."):
        assert response.status_code == 400 and "file name" in response.json()["error"]["message"]
    else:
        assert response.status_code == 200, response.text


async def test_an_uploaded_document_keeps_no_folders_and_no_control_characters_in_its_name_or_title(acme):
    created = await acme.post(f"{V1}/knowledge-bases", json={"name": "kettle-names"})
    kb = created.json()["id"]
    upload = await acme.post(f"{V1}/knowledge-bases/{kb}/documents", data={"title": "Warranty\x00 terms\x07"},
                             files={"file": ("..\\..\\pwned2.md", DESCALING.encode(), "text/markdown")})
    document = await ingested(acme, upload)
    assert document["title"] == "Warranty terms"
    assert document["source"] == "upload:pwned2.md"
    text = await acme.post(f"{V1}/knowledge-bases/{kb}/documents/text", json={"text": WARRANTY, "title": "a\x00b\nc"})
    assert (await ingested(acme, text))["title"] == "ab c"


async def test_empty_or_binary_uploads_are_refused_with_a_clear_4xx_and_nothing_is_kept(acme):
    import random

    kb = (await acme.post(f"{V1}/knowledge-bases", json={"name": "kettle-hostile"})).json()["id"]
    empty = await acme.post(f"{V1}/knowledge-bases/{kb}/documents", files={"file": ("empty.txt", b"", "text/plain")})
    noise = await acme.post(f"{V1}/knowledge-bases/{kb}/documents", files={"file": ("noise.txt", random.Random(3).randbytes(200_000), "text/plain")})
    assert empty.status_code == 400 and "no text" in empty.json()["error"]["message"]
    assert noise.status_code == 400 and "does not look like text" in noise.json()["error"]["message"]
    assert (await acme.get(f"{V1}/knowledge-bases/{kb}/documents")).json()["items"] == []


async def test_the_search_api_can_run_the_pipelines_rerank_chain(acme):
    from ragline.contracts.passages import SearchResult
    from ragline.retrieval.reranking import rerank_results

    kb, doc = await kettle_kb(acme, "kettle-rerank")
    ask = {"query": "how long is the warranty", "knowledge_base_ids": [kb]}
    raw = (await acme.post(f"{V1}/knowledge-bases/search", json=ask)).json()["items"]
    reranked = (await acme.post(f"{V1}/knowledge-bases/search", json={**ask, "rerank_top_k": 1})).json()["items"]
    assert len(raw) == 2 and "composite_score" not in raw[0]["metadata"]
    assert len(reranked) == 1 and reranked[0]["knowledge_id"] == doc and "composite_score" in reranked[0]["metadata"]
    # the very chain the rerank stage runs, on the same hits (no rerank model: search scores stand in)
    expected = await rerank_results(ask["query"], [SearchResult.model_validate(r) for r in raw], None,
                                    threshold=0.3, top_k=1, scoped=False)
    assert [r.model_dump(mode="json") for r in expected] == reranked
