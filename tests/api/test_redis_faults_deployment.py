"""The faults of test_redis_faults.py on a real shared deployment: two `ragline serve` replicas and
a dedicated `ragline worker`, each a process of its own, on one Redis 8 started here.

Under a write pause both replicas keep serving keyed reads; with Redis stopped (SIGSTOP) both
answer 503 within their socket timeout and /health answers, and a worker started then waits for
Redis instead of exiting; once Redis is back, an upload made on one replica is indexed by that
worker and listed on the other.
"""

from __future__ import annotations

import asyncio
import signal

import httpx
import redis as redis_sync

from tests.api.deployment import Deployment, Worker
from tests.api.jobs import ingested
from tests.redis_server import RedisServer

KEYS = {"fault-key": "acme"}
HEADERS = {"X-API-Key": "fault-key"}
PATIENCE_S = 60  # the replicas' socket timeout is the default 10 s: an answer within this was bounded
WORKER_PATIENCE_S = 300  # a worker that starts while Redis is stopped waits for it, then loads its models


async def _get_all(urls: list[str], path: str, headers: dict[str, str]) -> list[httpx.Response]:
    async with httpx.AsyncClient(timeout=PATIENCE_S, headers=headers) as client:
        return await asyncio.gather(*(client.get(f"{url}{path}") for url in urls))


async def test_two_replicas_and_a_worker_ride_out_a_write_pause_and_a_stopped_redis(scripted_model, tmp_path):
    server = RedisServer().start()
    deployment = Deployment(server, scripted_model, tmp_path, api_keys=KEYS)
    admin = redis_sync.Redis.from_url(server.url)
    try:
        a, b = deployment.replica("a"), deployment.replica("b")
        urls = [a.url, b.url]
        async with httpx.AsyncClient(base_url=a.url, timeout=120, headers=HEADERS) as to_a:
            made = await to_a.post("/api/v1/knowledge-bases", json={"name": "manuals"})
            assert made.status_code == 201, made.text
        kb = made.json()["id"]

        admin.execute_command("CLIENT", "PAUSE", PATIENCE_S * 4 * 1000, "WRITE")
        for response in await _get_all(urls, "/api/v1/knowledge-bases", HEADERS):
            assert response.status_code == 200 and [item["id"] for item in response.json()["items"]] == [kb]
        admin.execute_command("CLIENT", "UNPAUSE")

        assert server._process is not None
        server._process.send_signal(signal.SIGSTOP)
        try:
            worker = deployment.worker("worker")  # starts while Redis is stopped: it must wait, not exit
            for response in await _get_all(urls, "/health", {}):
                assert response.status_code == 503, response.text
            for response in await _get_all(urls, "/api/v1/knowledge-bases", HEADERS):
                assert response.status_code == 503 and "Redis" in response.json()["error"]["message"], response.text
            await _until_logged(worker, "waiting for it")
        finally:
            server._process.send_signal(signal.SIGCONT)

        async with (httpx.AsyncClient(base_url=a.url, timeout=120, headers=HEADERS) as to_a,
                    httpx.AsyncClient(base_url=b.url, timeout=120, headers=HEADERS) as to_b):
            accepted = await to_a.post(f"/api/v1/knowledge-bases/{kb}/documents/text",
                                       json={"text": "The Aurora pump moves coolant. Prime it before starting.", "title": "Aurora"})
            async with asyncio.timeout(WORKER_PATIENCE_S):  # a worker that died leaves the job queued for ever
                document = await ingested(to_a, accepted)
            listed = await to_b.get(f"/api/v1/knowledge-bases/{kb}/documents")
            assert [item["id"] for item in listed.json()["items"]] == [document["id"]]
    finally:
        deployment.stop()
        server.stop()


async def _until_logged(worker: Worker, text: str) -> None:
    """Until the worker's log says `text`; fails at once if the worker exits meanwhile."""
    async with asyncio.timeout(WORKER_PATIENCE_S):
        while text not in (worker.log.read_text(errors="replace") if worker.log.exists() else ""):
            assert worker.process.poll() is None, worker.log.read_text(errors="replace")
            await asyncio.sleep(0.5)
