"""Uploads as ingestion jobs in embedded mode (no Redis): 202 with a job, progress over SSE, the
document searchable once done, cancel over HTTP; the jobs run inside the service's own loop."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from ragline.api.app import create_app
from ragline.services import Services
from tests.api.jobs import finished, job_events
from tests.api.live import ThreadServer, memory_settings
from tests.scripted_model import Reply

V1 = "/api/v1"
MANUAL = "\n\n".join(f"Step {i}: turn valve {i} of the Aurora pump a quarter turn; gauge {i} reads {i * 7} kPa." * 4 for i in range(16))


@pytest.fixture(scope="module")
def server(tmp_path_factory, scripted_server) -> Iterator[ThreadServer]:
    settings = memory_settings(scripted_server, data_dir=tmp_path_factory.mktemp("jobs-api"), embedding_model="openai/scripted-embed",
                               embedding_api_base=scripted_server.base_url, embedding_api_key="scripted-key", embedding_batch_size=1)
    live = ThreadServer(create_app(settings, services=Services(settings))).start()
    yield live
    live.stop()


@pytest.fixture
async def client(server, scripted_model) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
        yield http


async def new_kb(client: httpx.AsyncClient, name: str) -> str:
    return (await client.post(f"{V1}/knowledge-bases", json={"name": name})).json()["id"]


async def test_an_upload_answers_202_with_a_job_whose_progress_ends_in_a_searchable_document(client, scripted_model):
    scripted_model.on_embedding(Reply(delay=0.3))  # a slow model: progress is reported while it embeds
    kb = await new_kb(client, "pump")
    accepted = await client.post(f"{V1}/knowledge-bases/{kb}/documents", files={"file": ("pump.md", MANUAL.encode(), "text/markdown")})
    assert accepted.status_code == 202, accepted.text
    job = accepted.json()
    assert job["state"] == "queued" and job["filename"] == "pump.md" and accepted.headers["location"].endswith(f"/jobs/{job['id']}")
    seen = await job_events(client, accepted)
    states = [e["state"] for e in seen]
    assert states[0] in ("queued", "running") and states[-1] == "done" and "running" in states
    assert any(e["phase"] == "embedding" and e["total"] > 0 for e in seen)  # progress, not only a start and an end
    polled = (await client.get(f"{V1}/knowledge-bases/{kb}/jobs/{job['id']}")).json()
    assert polled["state"] == "done" and polled["document"]["chunk_count"] == polled["total"] > 1
    found = (await client.post(f"{V1}/knowledge-bases/search", json={"query": "valve 7 gauge", "knowledge_base_ids": [kb]})).json()["items"]
    assert found and found[0]["knowledge_id"] == polled["document"]["id"]


async def test_a_running_job_is_cancelled_over_http_and_stores_nothing(client, scripted_model):
    scripted_model.on_embedding(Reply(delay=0.2))
    kb = await new_kb(client, "pump-cancel")
    text = MANUAL.replace("Aurora", "Borealis")  # not embedded before: no cached vectors, so the slow embedding is what runs
    accepted = await client.post(f"{V1}/knowledge-bases/{kb}/documents/text", json={"text": text, "title": "pump"})
    job = accepted.json()["id"]
    async with client.stream("GET", accepted.headers["location"] + "/events") as events:
        async for line in events.aiter_lines():  # until the embedding is under way
            if '"phase":"embedding"' in line and '"done":1' in line:
                break
    canceled = await client.delete(f"{V1}/knowledge-bases/{kb}/jobs/{job}")
    assert canceled.status_code == 200 and canceled.json()["state"] == "canceled"
    assert (await finished(client, accepted))["state"] == "canceled"
    assert (await client.get(f"{V1}/knowledge-bases/{kb}/documents")).json()["items"] == []
    again = await client.post(f"{V1}/knowledge-bases/{kb}/jobs/{job}/cancel")
    assert again.json()["state"] == "canceled"  # cancelling twice changes nothing
    scripted_model.reset()
    assert (await finished(client, await client.post(f"{V1}/knowledge-bases/{kb}/documents/text", json={"text": "Blue pump."})))["state"] == "done"


async def test_a_job_of_another_knowledge_base_or_a_missing_one_is_404(client):
    kb, other = await new_kb(client, "pump-a"), await new_kb(client, "pump-b")
    accepted = await client.post(f"{V1}/knowledge-bases/{kb}/documents/text", json={"text": "The pump is red."})
    job = (await finished(client, accepted))["id"]
    assert (await client.get(f"{V1}/knowledge-bases/{other}/jobs/{job}")).status_code == 404
    assert (await client.get(f"{V1}/knowledge-bases/{kb}/jobs/nope")).status_code == 404
