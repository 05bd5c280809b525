"""Following an ingestion job the way a client does: from the 202 answer, over the job's SSE events."""

from __future__ import annotations

import json
from typing import Any

import httpx

FINAL = ("done", "failed", "canceled")


async def job_events(client: httpx.AsyncClient, accepted: httpx.Response) -> list[dict[str, Any]]:
    """Every job record the events stream sent, the last one final (the stream ends there)."""
    assert accepted.status_code == 202, accepted.text
    seen: list[dict[str, Any]] = []
    async with client.stream("GET", accepted.headers["location"] + "/events") as response:
        assert response.status_code == 200, await response.aread()
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                seen.append(json.loads(line.removeprefix("data: "))["data"])
    assert seen and seen[-1]["state"] in FINAL, seen
    return seen


async def finished(client: httpx.AsyncClient, accepted: httpx.Response) -> dict[str, Any]:
    """The job of a 202 answer in its final state."""
    return (await job_events(client, accepted))[-1]


async def ingested(client: httpx.AsyncClient, accepted: httpx.Response) -> dict[str, Any]:
    """The document a 202 answer's job stored (the job must end done)."""
    job = await finished(client, accepted)
    assert job["state"] == "done", job
    return job["document"]


def knowledge_base_over_rest(url: str, key: str, name: str, documents: dict[str, str],
                             description: str = "") -> tuple[str, dict[str, str]]:
    """A knowledge base of `key`'s tenant made as a client makes it, over the REST API, each text
    document's job followed to its end: the base's id, and each document's id by its title."""
    import asyncio

    async def build() -> tuple[str, dict[str, str]]:
        async with httpx.AsyncClient(base_url=url, timeout=120, headers={"X-API-Key": key}) as client:
            created = await client.post("/api/v1/knowledge-bases", json={"name": name, "description": description})
            assert created.status_code == 201, created.text
            kb = created.json()["id"]
            add = f"/api/v1/knowledge-bases/{kb}/documents/text"
            ids = {title: (await ingested(client, await client.post(add, json={"text": text, "title": title})))["id"]
                   for title, text in documents.items()}
            return kb, ids

    return asyncio.run(build())
