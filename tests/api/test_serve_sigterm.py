"""`ragline serve` ends within seconds of SIGTERM even while a document is embedding (the local
embedder computing in a worker thread), and the document half-embedded is not stored."""

from __future__ import annotations

import random
import signal
import time

import httpx

from tests.api.live import ProcessServer

WORDS = ("sensor", "battery", "kettle", "station", "pairing", "warranty", "humidity", "wind", "display", "firmware", "reset")


def test_serve_exits_on_sigterm_mid_embedding(tmp_path):
    server = ProcessServer({"RAGLINE_DATA_DIR": str(tmp_path / "data")}, log=tmp_path / "serve.log").start(timeout=120)
    base = f"{server.url}/api/v1"
    assert server.process is not None
    try:
        kb = httpx.post(f"{base}/knowledge-bases", json={"name": "manuals"}).json()["id"]
        rng = random.Random(3)
        text = "\n\n".join(" ".join(rng.choice(WORDS) for _ in range(100)) + "." for _ in range(600))  # ~1,200 chunks
        job = httpx.post(f"{base}/knowledge-bases/{kb}/documents/text", json={"text": text, "title": "long"}).json()
        job_url = f"{base}/knowledge-bases/{kb}/jobs/{job['id']}"
        deadline = time.monotonic() + 120
        while httpx.get(job_url).json()["phase"] != "embedding":
            assert time.monotonic() < deadline, httpx.get(job_url).text
            time.sleep(0.2)
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(timeout=30)  # embedding the whole document takes minutes here: an exit means it was not waited for
    finally:
        server.kill()
    from ragline.retrieval.catalog import SqliteCatalog

    path = tmp_path / "data" / "catalog.sqlite"
    assert path.exists()
    catalog = SqliteCatalog(path)
    assert catalog.get_kb(kb) is not None and catalog.list_knowledge(kb) == []
