"""The shared deployment of issue 12, with real processes: one Redis 8, two `ragline serve`
replicas and `ragline worker`s, each with its own empty data directory.

A knowledge base made on replica A, documents uploaded there and indexed by the worker, are found
and cited on replica B. A worker killed by SIGKILL mid-document is replaced and the document ends
with the chunks of a clean run. Nothing of the shared state (catalog, vectors, memory, entity graph,
images) lands on a replica's disk.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.deployment import Deployment
from tests.api.jobs import finished, ingested
from tests.api.live import collect, types
from tests.redis_server import RedisServer
from tests.scripted_model import Reply, ScriptedModel

V1 = "/api/v1"
DOCUMENTS = {
    "aurora": ("Aurora pump", "The Aurora pump moves coolant through the reactor loop. Prime the Aurora pump before starting it."),
    "borealis": ("Borealis kettle", "The Borealis kettle boils water in ninety seconds. Descale the Borealis kettle every month."),
    "cumulus": ("Cumulus router", "The Cumulus router forwards packets between subnets. Reboot the Cumulus router after a firmware update."),
}
# 24 paragraphs: two dozen chunks, embedded one per call (batch size 1), slowly enough to be killed midway
MANUAL = "\n\n".join(f"Step {i}: turn valve {i} of the Aurora pump a quarter turn and check gauge {i} reads {i * 7} kPa." * 4 for i in range(24))
CITED = Reply(chunks=["The Borealis kettle should be descaled every month", ' <ref i', 'd="c1"', '/>', "."])


@pytest.fixture
def deployment(redis_server: RedisServer, scripted_model: ScriptedModel, tmp_path: Path) -> Any:
    redis_server.flush()
    running = Deployment(redis_server, scripted_model, tmp_path)
    yield running
    running.stop()


async def new_kb(client: httpx.AsyncClient, name: str) -> str:
    response = await client.post(f"{V1}/knowledge-bases", json={"name": name})
    assert response.status_code == 201, response.text
    return response.json()["id"]


async def add_text(client: httpx.AsyncClient, kb: str, text: str, title: str, source: str) -> httpx.Response:
    return await client.post(f"{V1}/knowledge-bases/{kb}/documents/text", json={"text": text, "title": title, "source": source})


async def documents(client: httpx.AsyncClient, kb: str) -> dict[str, dict[str, Any]]:
    """The knowledge base's documents by source."""
    response = await client.get(f"{V1}/knowledge-bases/{kb}/documents")
    assert response.status_code == 200, response.text
    return {doc["source"]: doc for doc in response.json()["items"]}


async def until_embedding_midway(client: httpx.AsyncClient, accepted: httpx.Response) -> dict[str, Any]:
    """Follow the job's events until it is embedding, with some chunks done and some left."""
    async with client.stream("GET", accepted.headers["location"] + "/events") as response:
        assert response.status_code == 200, await response.aread()
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                job = json.loads(line.removeprefix("data: "))["data"]
                assert job["state"] not in ("done", "failed", "canceled"), job  # it must still be running when killed
                if job.get("phase") == "embedding" and 2 <= job["done"] < job["total"]:
                    return job
    raise AssertionError("the job's events ended before its embedding was under way")


LOCAL_STATE_FILES = ("catalog.sqlite", "memory.sqlite", "graph.duckdb")  # the catalog, long-term memory, the entity graph
LOCAL_STATE_DIRS = ("chroma", "images")  # vectors, document images (uploaded in tests/api/test_shared_images.py)


def stack_files(data_dir: Path) -> list[Path]:
    """What embedded mode would have written of the shared state: the SQLite catalog, the Chroma
    folder, long-term memory, the DuckDB entity graph, stored images."""
    return [p for p in data_dir.rglob("*")
            if p.name in LOCAL_STATE_FILES or (p.is_dir() and p.name in LOCAL_STATE_DIRS)]


async def test_replicas_share_knowledge_through_redis_and_a_killed_worker_is_replaced(deployment: Deployment, scripted_model: ScriptedModel):
    a, b = deployment.replica("a"), deployment.replica("b")
    first = deployment.worker("worker-1")
    async with httpx.AsyncClient(base_url=a.url, timeout=120) as to_a, httpx.AsyncClient(base_url=b.url, timeout=120) as to_b:
        # --- a knowledge base made on A, 3 documents uploaded to A, indexed by the worker ---
        kb = await new_kb(to_a, "shared")
        accepted = [await add_text(to_a, kb, text, title, f"src:{key}") for key, (title, text) in DOCUMENTS.items()]
        stored = {key: await ingested(to_a, answer) for key, answer in zip(DOCUMENTS, accepted, strict=True)}
        assert all(doc["chunk_count"] >= 1 for doc in stored.values()), stored

        # --- B finds each of them ---
        listed = await documents(to_b, kb)
        assert {source: doc["id"] for source, doc in listed.items()} == {f"src:{key}": doc["id"] for key, doc in stored.items()}
        for key, (title, _) in DOCUMENTS.items():
            response = await to_b.post(f"{V1}/knowledge-bases/search", json={"query": title, "knowledge_base_ids": [kb]})
            assert response.status_code == 200, response.text
            hits = response.json()["items"]
            assert hits and hits[0]["knowledge_id"] == stored[key]["id"], (key, hits)

        # --- an answer on B cites one of them ---
        scripted_model.on(lambda body: True, CITED)
        session = await to_b.post(f"{V1}/sessions", json={"title": "kettle"})
        assert session.status_code == 201, session.text
        ask = {"query": "How often should the Borealis kettle be descaled?", "knowledge_base_ids": [kb], "rewrite_enabled": False}
        got = await collect(to_b, "POST", f"{V1}/sessions/{session.json()['id']}/knowledge-chat", json=ask)
        assert types(got)[-1] == "complete" and "error" not in types(got), types(got)
        references = next(f.event["knowledge_references"] for f in got if f.type == "references")
        answer = "".join(f.event.get("content") or "" for f in got if f.type == "answer")
        tag = re.search(r'<kb [^>]*chunk_id="([^"]+)"[^>]*/>', answer)
        assert tag, answer
        cited = next(r for r in references if r["chunk_id"] == tag.group(1))
        assert cited["knowledge_id"] == stored["borealis"]["id"], (cited, references)
        assert answer.startswith("The Borealis kettle should be descaled every month <kb ") and "<ref" not in answer

        # --- the worker is killed mid-document; a second worker finishes the job ---
        scripted_model.on_embedding(Reply(delay=0.3))  # ~7 s of embedding for the manual's two dozen chunks
        manual = await add_text(to_a, kb, MANUAL, "Aurora manual", "src:manual")
        midway = await until_embedding_midway(to_b, manual)
        first.kill()
        assert midway["attempts"] == 1, midway
        second = deployment.worker("worker-2")
        done = await finished(to_b, manual)
        assert done["state"] == "done" and done["attempts"] >= 2, done  # taken over (more than once if a busy CI stalls a heartbeat)

        # --- the same document ingested cleanly into a second knowledge base ---
        clean_kb = await new_kb(to_a, "clean")
        clean = await finished(to_a, await add_text(to_a, clean_kb, MANUAL, "Aurora manual", "src:manual"))
        assert clean["state"] == "done" and clean["attempts"] == 1, clean
        second.stop()

        killed_doc, clean_doc = (await documents(to_b, kb))["src:manual"], (await documents(to_b, clean_kb))["src:manual"]
        assert killed_doc["chunk_count"] == clean_doc["chunk_count"] == done["document"]["chunk_count"] > 10
        chunks = {}
        for kb_id, doc in ((kb, killed_doc), (clean_kb, clean_doc)):
            response = await to_b.get(f"{V1}/knowledge-bases/{kb_id}/documents/{doc['id']}/chunks")
            assert response.status_code == 200, response.text
            chunks[kb_id] = [(c["chunk_index"], c["content"]) for c in response.json()["items"]]
        assert sorted(chunks[kb]) == sorted(chunks[clean_kb]) and len(chunks[kb]) == clean_doc["chunk_count"]  # stored once

    # --- nothing of the shared state on the replicas' (or the workers') disks ---
    for name, data_dir in deployment.data_dirs.items():
        assert stack_files(data_dir) == [], (name, stack_files(data_dir))
