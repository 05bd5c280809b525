"""The contention harness (issue 32): one workload on an idle machine, then beside N busy processes.

    python benchmarks/contention.py [--busy 2] [--questions 3] [--passages 40] [--streams 10] [--stops 5]

A knowledge service shares its cores with whatever else the host runs. This runs the same
workload in two phases, idle and with `--busy` CPU burners (unniced `while True: pass` loops that
the harness starts and stops itself, each killed after --max-s at the latest), and prints each
figure idle, loaded, their ratio, and the slowdown a fair share of the CPU explains: with B busy
processes beside a workload that keeps C cores busy, (B + C) / C (2 busy on 2 cores: 2x).

The workload, in each phase:
- ingestion: the local embedder (multilingual-e5-small) embeds and indexes --passages XQuAD
  paragraphs as documents of a fresh knowledge base (each phase its own paragraphs, so the
  embedding cache never answers, in this run or a later one): passages per second;
- first answer token: --questions sample-manual questions through the whole `ragline` graph with
  the local model (the sample knowledge base is indexed first if missing): seconds to the first
  answer event, median;
- stream: --streams concurrent chat turns against `ragline serve` with the scripted model (40
  chunks, 20 ms apart: 0.8 s of model time): seconds from the POST to `complete`, p50 and p99;
- stop: a stream stopped after its third answer frame: seconds from the stop request to the
  stream's `complete` (the run cancelled, the partial answer saved), median of --stops.

The local parts run in this process on the default data directory (RAGLINE_DATA_DIR), as
`ragline ask` would. Nothing is pass/fail; these machines are noisy: repeat a run before
trusting a ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import ROOT, parse_args, percentile, scripted_env, smoke_set, stop, wait_healthy

XQUAD = ROOT.parent / "shared" / "data" / "eval" / "xquad_en"
QUESTIONS = [
    "How long does pairing the Aurora sensor take?",
    "How often does the sensor send readings to the console?",
    "How do I reset the rainfall total?",
    "Which Wi-Fi networks does the console support?",
    "How high above the ground should the sensor mast be mounted?",
]
WORDS = " ".join(f"w{i}" for i in range(40))
RUN = uuid.uuid4().hex[:12]
BURNER = "import time\nend = time.monotonic() + float(__import__('sys').argv[1])\nwhile time.monotonic() < end:\n    pass\n"


@dataclass
class Phase:
    name: str
    passages_per_s: float = 0.0
    first_token_s: float = 0.0
    stream_p50_s: float = 0.0
    stream_p99_s: float = 0.0
    stop_s: float = 0.0


@contextmanager
def busy(count: int, max_s: float) -> Any:
    """`count` CPU burners for the length of the block (and never longer than max_s)."""
    burners = [subprocess.Popen([sys.executable, "-c", BURNER, str(max_s)]) for _ in range(count)]
    try:
        time.sleep(0.5 if burners else 0)  # running before the workload starts
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


def paragraphs(data: Path, start: int, count: int) -> list[str]:
    """XQuAD paragraphs, each with this run's mark: the embedding cache (data_dir) knows none of them."""
    rows = [json.loads(line)["text"] for line in (data / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    return [f"{text}\n\n(contention run {RUN})" for text in rows[start : start + count]]


async def ingestion_rate(services: Any, texts: list[str]) -> float:
    from ragline.contracts.access import Principal
    from ragline.ingestion.service import TextDocument

    stack = services.retrieval
    kb = await asyncio.to_thread(stack.knowledge_bases.create, f"contention-{uuid.uuid4().hex[:8]}")
    started = time.perf_counter()
    await services.ingestion.ingest_documents(kb.id, [TextDocument(text, f"p{i}", f"contention:{uuid.uuid4().hex}") for i, text in enumerate(texts)])
    elapsed = time.perf_counter() - started
    await stack.knowledge_bases.delete(kb.id, Principal.operator_of("default"))
    return len(texts) / elapsed


async def first_tokens(services: Any, graph: Any, kb_id: str, questions: list[str], max_tokens: int | None = None) -> float:
    from ragline.contracts.request import PipelineRequest, SummaryConfig
    from ragline.evaluation.answers import ask

    times = []
    for question in questions:
        request = PipelineRequest(query=question, knowledge_base_ids=(kb_id,), summary=SummaryConfig(max_tokens=max_tokens))
        turn = await ask(graph, services, request, "default")
        if turn.first_token_s is not None:
            times.append(turn.first_token_s)
    return statistics.median(times) if times else float("nan")


async def stream_times(url: str, streams: int) -> list[float]:
    import httpx

    from tests.api.live import frames as sse_frames

    async def one(client: httpx.AsyncClient) -> float:
        sid = (await client.post("/api/v1/sessions", json={"title": "contention"})).json()["id"]
        started = time.perf_counter()
        async with client.stream("POST", f"/api/v1/sessions/{sid}/chat", json={"query": "Tell me", "rewrite_enabled": False}) as response:
            async for frame in sse_frames(response):
                if frame.type == "complete":
                    break
        return time.perf_counter() - started

    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        return list(await asyncio.gather(*(one(client) for _ in range(streams))))


async def stop_times(url: str, stops: int) -> list[float]:
    import httpx

    from tests.api.live import frames as sse_frames

    times = []
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        for _ in range(stops):
            sid = (await client.post("/api/v1/sessions", json={"title": "stop"})).json()["id"]
            answers, stopped_at = 0, None
            async with client.stream("POST", f"/api/v1/sessions/{sid}/chat", json={"query": "Tell me", "rewrite_enabled": False}) as response:
                async for frame in sse_frames(response):
                    answers += frame.type == "answer"
                    if answers == 3 and stopped_at is None:
                        stopped_at = time.perf_counter()
                        await client.post(f"/api/v1/sessions/{sid}/stop", json={})
                    if frame.type == "complete" and stopped_at is not None:
                        times.append(time.perf_counter() - stopped_at)
                        break
    return times


def start_server(model_url: str, data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    from tests.redis_server import free_port

    port = free_port()
    env = {**os.environ, **scripted_env(model_url), "RAGLINE_DATA_DIR": str(data_dir)}
    process = subprocess.Popen([sys.executable, "-m", "ragline", "serve", "--port", str(port), "--log-level", "warning"], cwd=ROOT, env=env)
    url = f"http://127.0.0.1:{port}"
    wait_healthy(process, f"{url}/health", timeout_s=120)
    return process, url


async def measure(phase: Phase, args: argparse.Namespace, services: Any, graph: Any, kb_id: str, url: str, offset: int) -> Phase:
    phase.passages_per_s = await ingestion_rate(services, paragraphs(args.data, offset, args.passages))
    phase.first_token_s = await first_tokens(services, graph, kb_id, QUESTIONS[: args.questions], args.max_tokens)
    times = await stream_times(url, args.streams)
    phase.stream_p50_s, phase.stream_p99_s = percentile(times, 50), percentile(times, 99)
    phase.stop_s = statistics.median(await stop_times(url, args.stops))
    return phase


async def run(args: argparse.Namespace) -> None:
    import tempfile

    from ragline.checkpoints.savers import memory_saver
    from ragline.evaluation.answers import warm_up
    from ragline.graph.graphs import build_graph
    from ragline.ingestion.sample import ensure_sample_kb
    from ragline.services import Services
    from tests.scripted_model import Reply, ScriptedModel

    services = Services.from_settings()
    model = ScriptedModel().start()
    model.default = Reply.text(WORDS, chunk_delay=0.02)
    server = None
    try:
        kb = await ensure_sample_kb(services.retrieval)
        graph = build_graph("ragline", checkpointer=memory_saver())
        await warm_up(services)
        await first_tokens(services, graph, kb.id, QUESTIONS[:1], args.max_tokens)  # the model loaded, the prompt cache warm
        await ingestion_rate(services, paragraphs(args.data, 2 * args.passages, 2))  # the embedder loaded (paragraphs no phase ingests)
        with tempfile.TemporaryDirectory() as data_dir:
            server, url = start_server(model.base_url, Path(data_dir))
            await stream_times(url, 2)  # imports, connections, first checkpoint
            idle = await measure(Phase("idle"), args, services, graph, kb.id, url, 0)
            with busy(args.busy, args.max_s):
                loaded = await measure(Phase(f"{args.busy} busy"), args, services, graph, kb.id, url, args.passages)
    finally:
        if server is not None:
            stop(server)
        model.stop()
        await services.aclose()
    cores = os.cpu_count() or 1
    fair = (args.busy + cores) / cores
    print(f"\nContention: the workload idle and beside {args.busy} busy processes on {cores} cores "
          f"(a fair CPU share explains {fair:.1f}x)\n")
    print("| figure | idle | loaded | loaded / idle | fair share |")
    print("| --- | ---: | ---: | ---: | ---: |")
    rows = [
        ("ingestion, passages/s (higher is better)", idle.passages_per_s, loaded.passages_per_s, idle.passages_per_s / loaded.passages_per_s),
        ("first answer token, s (local model, median)", idle.first_token_s, loaded.first_token_s, loaded.first_token_s / idle.first_token_s),
        (f"stream POST -> complete p50, s ({args.streams} at once)", idle.stream_p50_s, loaded.stream_p50_s, loaded.stream_p50_s / idle.stream_p50_s),
        (f"stream POST -> complete p99, s ({args.streams} at once)", idle.stream_p99_s, loaded.stream_p99_s, loaded.stream_p99_s / idle.stream_p99_s),
        ("stop -> the stream's complete, s (median)", idle.stop_s, loaded.stop_s, loaded.stop_s / idle.stop_s),
    ]
    for name, a, b, ratio in rows:
        print(f"| {name} | {a:.2f} | {b:.2f} | {ratio:.2f}x slower | {fair:.1f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--busy", type=int, default=2, help="CPU burners beside the workload in the loaded phase")
    parser.add_argument("--questions", type=int, default=3, help="local-model questions per phase (at most 5)")
    parser.add_argument("--passages", type=int, default=40, help="XQuAD paragraphs ingested per phase")
    parser.add_argument("--streams", type=int, default=10, help="concurrent scripted chat streams")
    parser.add_argument("--stops", type=int, default=5, help="streams stopped mid-answer per phase")
    parser.add_argument("--max-s", type=float, default=900, help="a burner ends after this long whatever happens")
    parser.add_argument("--data", type=Path, default=XQUAD, help="the XQuAD set: its paragraphs are ingested")
    parser.add_argument("--max-tokens", type=int, help="cap each local answer (default: the model's own limit)")
    # --smoke: one burner, and for 5 s at most (the other smoke runs share the cores)
    args = parse_args(parser, busy=1, questions=1, passages=2, streams=2, stops=1, max_s=5, max_tokens=8)
    if args.smoke:
        args.data = smoke_set(args.data, questions=1, others=2 * args.passages + 2)
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
