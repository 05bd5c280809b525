"""Ingestion under chat load (issue 12): do chat answers wait behind ingestion jobs?

A shared deployment on this machine: one Redis 8 (search and JSON modules from PyPI, started as the
tests start it), one `ragline serve` that answers chat and accepts uploads but runs no jobs
(RAGLINE_SERVE_RUNS_JOBS=false), and W `ragline worker` processes that run the jobs. 20 chat
streams each ask knowledge-chat questions (Cranfield queries, rewrite off) on a small knowledge
base, one after another with --think-s between turns, in three phases:

1. baseline: no ingestion, for --baseline-s seconds;
2. 1 worker ingests N documents (Cranfield abstracts as text documents, recycled with new sources
   past the 1,400 there are) into a fresh knowledge base, posted at once (202 each);
3. the same with 2 workers, into another fresh knowledge base.

Measured per turn: first event (POST sent -> first SSE event) and first answer token (-> first
`answer` event: retrieval, context and the model's first token are behind it). A loaded phase counts
the turns that started after its first upload and ended before its last job did. Ingestion
throughput: documents (and their chunks) from the first upload's job creation to the last job's
end, over the jobs' own timestamps.

The model process (this file with --model) is the test suite's scripted OpenAI-compatible server:
chat answers of --tokens tokens at --rate tokens/s, and embeddings that are 384-dimensional
pseudo-random unit vectors (seeded by the text, so equal texts embed equally). The embedding call
is a real HTTP round trip through litellm, but no model computes: the local multilingual-e5-small
embeds 3 to 5 passages/s on these 2 cores (benchmarks/retrieval_latency.py prints it), which would
make ingestion throughput the model's and nothing else's. The figures are therefore ingestion
without embedding compute, the same substitution retrieval_latency.py makes.

Every process here shares the machine's cores (and, on a shared machine, other people's work):
workers that take a core from `ragline serve` show up in the chat latencies, so repeat a run before
trusting a ratio. --worker-nice N sets the workers' RAGLINE_WORKER_NICE (default 10, the product default).

    python benchmarks/ingest_under_load.py [--documents 2000] [--streams 20] [--baseline-s 60]
                                           [--think-s 1] [--tokens 20] [--rate 50] [--workers 1,2]
                                           [--worker-nice 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
from harness import ROOT, parse_args, percentile, smoke_clean, smoke_set
from ingest_deployment import SLOW_US, Deployment, SlowCommand, serve_model

from tests.api.live import frames
from tests.redis_server import missing_reason

V1 = "/api/v1"
CRANFIELD = ROOT.parent / "shared" / "data" / "eval" / "cranfield"
DIM = 384
POST_CONCURRENCY = 8  # uploads in flight at once: the client posts the N documents as fast as serve accepts them


# --- documents and jobs ---


def abstracts(data: Path) -> list[tuple[str, str]]:
    with (data / "corpus.jsonl").open(encoding="utf-8") as fh:
        return [(row["title"], row["text"]) for row in map(json.loads, fh) if row["text"].strip()]  # a few are empty


def questions(data: Path) -> list[str]:
    with (data / "queries.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line)["text"] for line in fh]


async def new_kb(client: httpx.AsyncClient, name: str) -> str:
    response = await client.post(f"{V1}/knowledge-bases", json={"name": name})
    response.raise_for_status()
    return str(response.json()["id"])


async def post_documents(client: httpx.AsyncClient, kb: str, count: int, corpus: list[tuple[str, str]]) -> list[str]:
    """Job URLs of `count` text documents posted with POST_CONCURRENCY in flight, in order."""
    gate = asyncio.Semaphore(POST_CONCURRENCY)

    async def post(i: int) -> str:
        title, text = corpus[i % len(corpus)]
        async with gate:
            response = await client.post(f"{V1}/knowledge-bases/{kb}/documents/text",
                                         json={"text": text, "title": title, "source": f"cranfield:{i}"})
        if response.status_code != 202:
            raise RuntimeError(f"upload {i}: HTTP {response.status_code} {response.text[:200]}")
        return str(response.headers["location"])

    return list(await asyncio.gather(*(post(i) for i in range(count))))


async def wait_jobs(client: httpx.AsyncClient, jobs: list[str], timeout_s: float) -> list[dict[str, Any]]:
    """The final records of the jobs, polled in order (each one at most every half second); past
    `timeout_s`, the records as they are: a job that never ends must end the phase, not the run."""
    records: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout_s
    for url in jobs:
        while True:
            record = (await client.get(url)).json()
            if record["state"] in ("done", "failed", "canceled") or time.monotonic() > deadline:
                records.append(record)
                break
            await asyncio.sleep(0.5)
    return records


@dataclass
class Throughput:
    documents: int
    chunks: int
    not_done: int  # failed, canceled, or still running when the phase timed out
    seconds: float
    window: tuple[float, float]  # wall clock: first job created, last job ended
    uploads_done: float = 0.0  # wall clock: the last upload accepted (serve's upload work ends here)

    @classmethod
    def of(cls, records: list[dict[str, Any]]) -> Throughput:
        done = [r for r in records if r["state"] == "done"]
        start, end = min(r["created_at"] for r in records), max(r["updated_at"] for r in records)
        return cls(len(done), sum(r["document"]["chunk_count"] for r in done), len(records) - len(done),
                   end - start, (start, end))


# --- the chat streams ---


@dataclass
class Turn:
    asked: float  # wall clock, as the jobs' timestamps
    first_event: float | None = None
    first_type: str = ""  # what the first event was (the turn's agent_query, as the pipeline is today)
    first_answer: float | None = None
    ended: float | None = None
    error: str | None = None


async def ask(client: httpx.AsyncClient, session: str, body: dict[str, Any]) -> Turn:
    turn = Turn(time.time())
    try:
        async with client.stream("POST", f"{V1}/sessions/{session}/knowledge-chat", json=body) as response:
            if response.status_code != 200:
                turn.error = f"HTTP {response.status_code}"
                return turn
            async for frame in frames(response):
                now = time.time()
                if turn.first_event is None:
                    turn.first_event, turn.first_type = now, frame.type
                if frame.type == "answer" and frame.event.get("content"):
                    turn.first_answer = turn.first_answer or now
                if frame.type == "error":
                    turn.error = str(frame.event.get("content", "error event"))[:200]
        turn.ended = time.time()
    except (httpx.HTTPError, OSError) as exc:
        turn.error = f"{type(exc).__name__}: {exc}"[:200]
    return turn


async def chat_stream(client: httpx.AsyncClient, kb: str, queries: list[str], offset: int, think_s: float,
                      stop: asyncio.Event, turns: list[Turn]) -> None:
    """One user: a session, then a question, its whole answer, a pause, the next question, until `stop`."""
    created = await client.post(f"{V1}/sessions", json={"title": f"load {offset}"})
    created.raise_for_status()
    session, asked = created.json()["id"], 0
    while not stop.is_set():
        query = queries[(offset + asked) % len(queries)]
        turns.append(await ask(client, session, {"query": query, "knowledge_base_ids": [kb], "rewrite_enabled": False}))
        asked += 1
        try:
            await asyncio.wait_for(stop.wait(), think_s)
        except TimeoutError:
            pass


@dataclass
class Phase:
    name: str
    workers: int
    turns: list[Turn]
    throughput: Throughput | None = None
    slow_redis: list[SlowCommand] = field(default_factory=list)
    cpu_s: dict[str, float] = field(default_factory=dict)  # CPU seconds each part used during the phase

    def counted(self) -> list[Turn]:
        """Turns that ran whole inside the ingestion window (all of them for the baseline)."""
        if self.throughput is None:
            return self.turns
        start, end = self.throughput.window
        return [t for t in self.turns if t.asked >= start and t.ended is not None and t.ended <= end]

    def span_s(self) -> float:
        asked = [t.asked for t in self.turns]
        return max(asked) - min(asked) if len(asked) > 1 else float("nan")

    def split(self) -> tuple[list[Turn], list[Turn]]:
        """Counted turns asked while serve still accepted uploads, and those asked after."""
        counted, done = self.counted(), self.throughput.uploads_done if self.throughput else 0.0
        return [t for t in counted if t.asked < done], [t for t in counted if t.asked >= done]


# --- the run ---


async def run(args: argparse.Namespace, deployment: Deployment) -> list[Phase]:
    corpus, queries = abstracts(args.data), questions(args.data)
    limits = httpx.Limits(max_connections=args.streams + POST_CONCURRENCY + 10, keepalive_expiry=1.0)
    async with httpx.AsyncClient(base_url=deployment.server.url, timeout=httpx.Timeout(120), limits=limits) as client:
        chat_kb = await new_kb(client, "chat")
        deployment.start_workers(1)
        await wait_jobs(client, await post_documents(client, chat_kb, args.chat_documents, corpus), args.phase_timeout_s)
        deployment.stop_workers()
        print(f"chat knowledge base ready ({args.chat_documents} abstracts)", file=sys.stderr, flush=True)
        await with_streams(client, chat_kb, queries, args, [], asyncio.sleep(args.warmup_s))  # not counted: first runs compile, connect
        phases = [Phase("baseline", 0, [])]
        before = deployment.cpu_seconds()
        await with_streams(client, chat_kb, queries, args, phases[0].turns, asyncio.sleep(args.baseline_s))
        phases[0].cpu_s = spent(before, deployment.cpu_seconds())
        for workers in args.workers:
            phase = Phase(f"ingesting, {workers} worker{'s' if workers > 1 else ''}", workers, [])
            deployment.start_workers(workers)
            kb = await new_kb(client, f"ingest-{workers}")
            deployment.watch_slow_commands()
            before = deployment.cpu_seconds()
            phase.throughput = await with_streams(client, chat_kb, queries, args, phase.turns,
                                                  ingest(client, kb, args.documents, corpus, args.phase_timeout_s))
            phase.slow_redis = deployment.slow_commands()
            phase.cpu_s = spent(before, deployment.cpu_seconds())
            deployment.stop_workers()
            phases.append(phase)
            print(f"{phase.name}: {phase.throughput.documents} documents in {phase.throughput.seconds:.0f} s",
                  file=sys.stderr, flush=True)
    return phases


def spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {part: after[part] - before.get(part, 0.0) for part in after}  # workers started in the phase count whole


async def ingest(client: httpx.AsyncClient, kb: str, count: int, corpus: list[tuple[str, str]], timeout_s: float) -> Throughput:
    jobs = await post_documents(client, kb, count, corpus)
    uploads_done = time.time()
    return replace(Throughput.of(await wait_jobs(client, jobs, timeout_s)), uploads_done=uploads_done)


async def with_streams(client: httpx.AsyncClient, kb: str, queries: list[str], args: argparse.Namespace,
                       turns: list[Turn], work: Any) -> Any:
    """Run `work` while args.streams chat streams ask questions; the streams stop when it is done."""
    stop = asyncio.Event()
    streams = [asyncio.create_task(chat_stream(client, kb, queries, i * 11, args.think_s, stop, turns))
               for i in range(args.streams)]
    try:
        return await work
    finally:
        stop.set()
        await asyncio.gather(*streams)


def milliseconds(turns: list[Turn], field: str) -> tuple[float, float]:
    values = [(getattr(t, field) - t.asked) * 1000 for t in turns if getattr(t, field) is not None]
    return (percentile(values, 50), percentile(values, 95)) if values else (float("nan"), float("nan"))


def report(phases: list[Phase], args: argparse.Namespace, load: tuple[float, float]) -> None:
    base_p95 = milliseconds(phases[0].counted(), "first_event")[1]
    first = Counter(t.first_type for phase in phases for t in phase.turns if t.first_type).most_common(1)
    print(f"\nIngestion under chat load: {args.streams} knowledge-chat streams (think {args.think_s:g} s, answers of "
          f"{args.tokens} tokens at {args.rate:g}/s), {args.documents} Cranfield text documents per loaded phase, "
          f"workers at nice {args.worker_nice}; "
          f"embeddings are pseudo-random 384-d vectors over HTTP (no model compute); {os.cpu_count()} cores shared "
          f"with other work, load average {load[0]:.1f} before / {load[1]:.1f} after; the first event is "
          f"`{first[0][0] if first else '-'}`\n")
    print("| phase | turns (errors) | first event p50 / p95 ms | p95 vs baseline | first answer token p50 / p95 ms "
          "| documents (not done) | chunks | seconds | documents/s | chunks/s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for phase in phases:
        turns = phase.counted()
        event, answer = milliseconds(turns, "first_event"), milliseconds(turns, "first_answer")
        errors = sum(1 for t in turns if t.error)
        t = phase.throughput
        ingest = (f"{t.documents} ({t.not_done}) | {t.chunks} | {t.seconds:.1f} | {t.documents / t.seconds:.1f} | "
                  f"{t.chunks / t.seconds:.1f}") if t else "- | - | - | - | -"
        print(f"| {phase.name} | {len(turns)} ({errors}) | {event[0]:.0f} / {event[1]:.0f} | {event[1] / base_p95:.2f}x "
              f"| {answer[0]:.0f} / {answer[1]:.0f} | {ingest} |")
    report_causes(phases[1:], base_p95)
    report_cpu(phases)


def report_cpu(phases: list[Phase]) -> None:
    """Who used the cores: a worker's niceness covers only its own process, not the work it hands
    Redis (indexing) and the model (embedding), which run at their own priority."""
    print("\n| phase | seconds | CPU s: serve | workers | Redis | model | cores busy |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for phase in phases:
        cpu = phase.cpu_s
        seconds = phase.throughput.seconds if phase.throughput else phase.span_s()
        print(f"| {phase.name} | {seconds:.0f} | {cpu.get('serve', 0):.1f} | {cpu.get('workers', 0):.1f} | "
              f"{cpu.get('redis', 0):.1f} | {cpu.get('model', 0):.1f} | {sum(cpu.values()) / seconds:.2f} |")


def report_causes(phases: list[Phase], base_p95: float) -> None:
    """Where a loaded phase's first-event latency comes from: serve accepting the uploads (the
    first part of a phase), and Redis commands long enough to hold chat requests back."""
    print(f"\n| phase | first event p95 ms while uploading (turns) | after the uploads (turns) | Redis commands "
          f"> {SLOW_US / 1000:g} ms | longest ms | most time in |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for phase in phases:
        during, after = (milliseconds(part, "first_event")[1] for part in phase.split())
        counts = [len(part) for part in phase.split()]
        slow = phase.slow_redis
        spent: dict[str, float] = {}
        for command in slow:
            name = command.command.split(" ")[0].upper()
            spent[name] = spent.get(name, 0.0) + command.ms
        top = ", ".join(f"{name} {ms:.0f} ms" for name, ms in sorted(spent.items(), key=lambda item: -item[1])[:2]) or "-"
        longest = max((c.ms for c in slow), default=0.0)
        print(f"| {phase.name} | {during:.0f} ({during / base_p95:.2f}x; {counts[0]}) | {after:.0f} ({after / base_p95:.2f}x; "
              f"{counts[1]}) | {len(slow)} | {longest:.1f} | {top} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=2000, help="documents ingested in each loaded phase")
    parser.add_argument("--streams", type=int, default=20, help="concurrent chat streams")
    parser.add_argument("--baseline-s", type=float, default=60.0, help="seconds of chat without ingestion")
    parser.add_argument("--warmup-s", type=float, default=10.0, help="seconds of chat before the baseline, not counted")
    parser.add_argument("--think-s", type=float, default=1.0, help="pause of each stream between its turns")
    parser.add_argument("--tokens", type=int, default=20, help="tokens per answer")
    parser.add_argument("--rate", type=float, default=50.0, help="answer tokens per second")
    parser.add_argument("--workers", default="1,2", help="worker counts, one loaded phase each")
    parser.add_argument("--phase-timeout-s", type=float, default=900.0, help="longest wait for one phase's jobs")
    parser.add_argument("--worker-nice", type=int, default=10, help="the workers' RAGLINE_WORKER_NICE (0: the same priority as serve)")
    parser.add_argument("--chat-documents", type=int, default=200, help="abstracts in the knowledge base the chat streams ask")
    parser.add_argument("--data", type=Path, default=CRANFIELD, help="the Cranfield set (BEIR layout): its abstracts and queries")
    parser.add_argument("--model", action="store_true", help=argparse.SUPPRESS)  # run as the model process
    args = parse_args(parser, documents=4, streams=2, baseline_s=1.0, warmup_s=0.5, think_s=0.2, tokens=5, workers="1",
                      phase_timeout_s=60.0, chat_documents=6)
    if args.model:
        serve_model(args.tokens, args.rate)
        return 0
    if (reason := missing_reason()) is not None:
        print(f"needs Redis 8 with its modules: {reason}", file=sys.stderr)
        return 2
    args.workers = [int(w) for w in args.workers.split(",") if w]
    if args.smoke:
        args.data = smoke_set(args.data)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="ragline-ingest-load-") as tmp:
        deployment = Deployment(args, Path(tmp))
        try:
            phases = asyncio.run(run(args, deployment))
        finally:
            deployment.stop()
    report(phases, args, (load_before, os.getloadavg()[0]))
    smoke_clean(args, [f"{phase.name}: {len([t for t in phase.turns if t.error])} turns failed, first: "
                       f"{next(t.error for t in phase.turns if t.error)}" for phase in phases if any(t.error for t in phase.turns)]
                + [f"{phase.name}: {phase.throughput.not_done} documents not ingested" for phase in phases
                   if phase.throughput and phase.throughput.not_done])
    return 0


if __name__ == "__main__":
    sys.exit(main())
