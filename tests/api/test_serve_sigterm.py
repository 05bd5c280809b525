"""`ragline serve` ends within seconds of SIGTERM even while a document is embedding (the local
embedder computing in a worker thread), and the document half-embedded is not stored."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import httpx

from tests.api.live import ROOT, free_port

WORDS = ("sensor", "battery", "kettle", "station", "pairing", "warranty", "humidity", "wind", "display", "firmware", "reset")


def test_serve_exits_on_sigterm_mid_embedding(tmp_path):
    port, log = free_port(), tmp_path / "serve.log"
    env = {**os.environ, "RAGLINE_DATA_DIR": str(tmp_path / "data")}
    with log.open("wb") as sink:
        server = subprocess.Popen([sys.executable, "-m", "ragline", "serve", "--port", str(port), "--log-level", "warning"],
                                  cwd=ROOT, env=env, stdout=sink, stderr=sink)
    base = f"http://127.0.0.1:{port}/api/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        kb = httpx.post(f"{base}/knowledge-bases", json={"name": "manuals"}).json()["id"]
        rng = random.Random(3)
        text = "\n\n".join(" ".join(rng.choice(WORDS) for _ in range(100)) + "." for _ in range(600))  # ~1,200 chunks
        job = httpx.post(f"{base}/knowledge-bases/{kb}/documents/text", json={"text": text, "title": "long"}).json()
        job_url = f"{base}/knowledge-bases/{kb}/jobs/{job['id']}"
        while httpx.get(job_url).json()["phase"] != "embedding":
            assert time.monotonic() < deadline, httpx.get(job_url).text
            time.sleep(0.2)
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)  # embedding the whole document takes minutes here: an exit means it was not waited for
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    from ragline.retrieval.catalog import SqliteCatalog

    path = tmp_path / "data" / "catalog.sqlite"
    assert path.exists()
    catalog = SqliteCatalog(path)
    assert catalog.get_kb(kb) is not None and catalog.list_knowledge(kb) == []
