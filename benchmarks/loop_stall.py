"""Does one upload stall the service? `/health` asked every 50 ms while a one-line document of
thousands of chunks is ingested; the longest wait between two answers is how long the event loop
stopped for every route of every tenant (issue 56 measured 3.8-8.0 s when the catalog transaction
ran on the loop).

The server runs as `ragline serve` would, in a subprocess, with the scripted embedder (so the
embedding step takes no CPU from the measurement) and the real catalog, Chroma and BM25 stores.

    python benchmarks/loop_stall.py [--chunks 4000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

from harness import ROOT, parse_args, percentile, scripted_env, smoke_clean, stop, wait_healthy

POLL_S = 0.05
STALL_MS = 250  # issue 56's bound: no route waits longer than this while a document is stored


@dataclass
class Row:
    chunks: int
    outcome: str
    seconds: float
    polls: int
    p50_ms: float
    p99_ms: float
    worst_ms: float
    stalls: int


def one_line_document(chunks: int, version: int) -> bytes:
    """A document with no line break to split on: about `chunks` chunks at the default chunk size
    (each version other words, so that every upload stores it anew)."""
    words = " ".join(f"reading{n} of the outdoor sensor at mast {version}" for n in range(chunks * 11))
    return words.encode("utf-8")


class HealthPoller(threading.Thread):
    """Asks /health every POLL_S and keeps the time between consecutive answers."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url, self.stop = url, threading.Event()
        self.gaps: list[float] = []

    def run(self) -> None:
        import httpx

        with httpx.Client(timeout=30) as client:
            last = time.monotonic()
            while not self.stop.is_set():
                client.get(self.url)
                now = time.monotonic()
                self.gaps.append((now - last) * 1000)
                last = now
                time.sleep(POLL_S)


def upload(client: object, kb: str, data: bytes) -> str:
    accepted = client.post(f"/api/v1/knowledge-bases/{kb}/documents", files={"file": ("one-line.txt", data)})  # type: ignore[attr-defined]
    if accepted.status_code != 202:
        return f"HTTP {accepted.status_code}"
    while True:
        job = client.get(accepted.headers["location"]).json()  # type: ignore[attr-defined]
        if job["state"] in ("done", "failed", "canceled"):
            document = job.get("document") or {}
            return f"{job['state']}: {document.get('chunk_count', job.get('error', ''))}"
        time.sleep(0.25)


def run(args: argparse.Namespace) -> list[Row]:
    import httpx

    from tests.redis_server import free_port
    from tests.scripted_model import ScriptedModel

    scripted = ScriptedModel().start()
    port = free_port()
    env = {**os.environ, **scripted_env(scripted.base_url), "RAGLINE_DATA_DIR": tempfile.mkdtemp(prefix="ragline-stall-"),
           "RAGLINE_EMBEDDING_MODEL": "openai/scripted-embed", "RAGLINE_EMBEDDING_API_BASE": scripted.base_url,
           "RAGLINE_EMBEDDING_API_KEY": "k"}
    server = subprocess.Popen([sys.executable, "-m", "ragline", "serve", "--port", str(port), "--log-level", "warning"], cwd=ROOT, env=env)
    rows: list[Row] = []
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(server, f"{url}/health", timeout_s=300)
        with httpx.Client(base_url=url, timeout=300) as client:
            kb = client.post("/api/v1/knowledge-bases", json={"name": "stall"}).json()["id"]
            upload(client, kb, b"A first small document opens the stores.")
            for version in range(args.repeat):
                data = one_line_document(args.chunks, version)
                poller = HealthPoller(f"{url}/health")
                poller.start()
                started = time.monotonic()
                outcome = upload(client, kb, data)
                seconds = time.monotonic() - started
                poller.stop.set()
                poller.join()
                gaps = poller.gaps[1:] or [0.0]
                rows.append(Row(args.chunks, outcome, seconds, len(gaps), statistics.median(gaps), percentile(gaps, 99), max(gaps),
                                sum(gap > STALL_MS for gap in gaps)))
    finally:
        stop(server)
        scripted.stop()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=4000, help="chunks of the one-line document (about)")
    parser.add_argument("--repeat", type=int, default=2, help="uploads, each a new version of the document")
    args = parse_args(parser, chunks=300, repeat=1)
    rows = run(args)
    print(f"/health every {POLL_S * 1000:.0f} ms while a one-line document is stored; a stall is a wait over {STALL_MS} ms")
    print("| chunks | outcome | upload s | polls | gap p50 ms | gap p99 ms | worst gap ms | stalls |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        print(f"| {row.chunks} | {row.outcome} | {row.seconds:.1f} | {row.polls} | {row.p50_ms:.0f} | {row.p99_ms:.0f} | {row.worst_ms:.0f} | {row.stalls} |")
    smoke_clean(args, [f"upload ended {row.outcome}" for row in rows if not row.outcome.startswith("done")])


if __name__ == "__main__":
    main()
