"""Load: N concurrent SSE answers on one `ragline serve` process, side by side with LangGraph's own
API server (`langgraph dev`) running the same graph (langgraph.json's `ragline`) on the same model.

The chat model is benchmarks/stamped_model.py in its own process: every answer is `--tokens`
tokens at `--rate` tokens/s, each token carrying its index and the wall-clock time it was sent.
For each N and each server, fresh processes, a warm-up, then N streams started evenly over
`--ramp` seconds (so that their tokens do not all fall on the same millisecond). Measured:

- latency: for each token, the time the client parsed the frame carrying it minus the time the
  model sent it (one clock: this machine's). It covers model -> server, the server's whole
  pipeline (LangGraph node, stream log, SSE) and server -> client, and the client's own lag
  when its process is short of CPU. p50/p99 over every token of every stream.
- first token: from the client's first request of the turn (session or thread) to its first
  token; peak streaming: the most streams delivering tokens at one moment. A server short of CPU
  admits turns late: its N streams then overlap less than N, and the per-token latency alone
  would flatter it.
- lost: tokens the model sent for a stream that its client never got (a failed stream loses all
  of them); dup: tokens received twice.
- MB/stream: the server's process-tree RSS at its peak during the N streams, minus after warm-up,
  divided by N.
- model tok/s: the rate the model really sent at, median over streams. Below --rate, the model's
  own process was short of CPU (it shares the cores): the offered load was lower than asked, and
  the latency above does not count the model's lag.
- gives first: the first failure seen (HTTP error, timeout, exception), else "-".
- server CPU: CPU seconds the server's process tree used during the N streams, and that divided by
  the tokens delivered: what one relayed token costs the server, whatever the machine's load.
- cores busy: CPU seconds of the server, the client (this process) and the model together, per
  wall second. Near the machine's core count, the three share too little CPU: latency then
  measures the queue for a core, whichever server runs.

The floor (`--servers floor`, benchmarks/floor_relay.py) answers Ragline's routes with nothing
between the model and the client: no graph, stream log or middleware. Its row is the best this
machine shows with these parts and this client; a goal below it is out of reach here.

Ragline: POST /api/v1/sessions, then POST /api/v1/sessions/{id}/chat (SSE). The peer: POST
/threads, then POST /threads/{id}/runs/stream with stream_mode custom, started with
--n-jobs-per-worker N so that runs stream concurrently instead of queueing.

Both servers run Ragline's graph, so both read the model with the same chat client: by default
models/openai_stream.py; `--readers direct,litellm` also runs Ragline with RAGLINE_CHAT_DIRECT=false
(litellm reads the stream, as before it), side by side under the same machine load. `--repeat K`
measures each row K times and adds a median row: on a shared machine single runs are noisy.

    python benchmarks/load.py [--n 50,100,200,500,1000] [--tokens 40] [--rate 20] [--ramp 1]
                              [--servers ragline,langgraph,floor] [--redis] [--readers direct,litellm] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import sys
import time
from typing import Any

import aiohttp
import stamped_model
import uvloop
from harness import KEEPALIVE_S, parse_args, percentile, smoke_clean, tree_cpu_s, tree_rss_mb
from load_servers import SERVERS, Server, StreamResult

# --- one measurement ---


async def one_stream(server: Server, client: Any, start_at: float, deadline_s: float) -> StreamResult:
    result = StreamResult()
    await asyncio.sleep(max(0.0, start_at - time.monotonic()))
    result.asked_at = time.time()
    try:
        async with asyncio.timeout(deadline_s):
            await server.ask(client, result)
    except TimeoutError:
        result.fail(f"timeout: no end after {deadline_s:.0f} s")
    except Exception as exc:  # connection refused or reset, EMFILE, protocol errors: what gave
        result.fail(f"{type(exc).__name__}: {exc}")
    return result


async def sample_rss(pid: int, peak: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        peak[0] = max(peak[0], await asyncio.to_thread(tree_rss_mb, pid))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.25)


async def drive(server: Server, n: int, ramp_s: float, deadline_s: float) -> list[StreamResult]:
    """N streams on one aiohttp session. Not httpx: its CPU per received chunk grows with the
    connections open (measured: about 10 s of client CPU for the 20,000 tokens at N = 500), and
    a client short of CPU adds its own lag to every latency it measures."""
    connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=KEEPALIVE_S)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=60)  # a stream that goes silent for a minute has failed
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as client:
        begin = time.monotonic()
        return await asyncio.gather(*(one_stream(server, client, begin + ramp_s * i / n, deadline_s) for i in range(n)))


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def measure(server: Server, n: int, args: argparse.Namespace) -> dict[str, Any]:
    assert server.process is not None
    await drive(server, 3, 0.0, 60)  # warm-up: imports, the first model connection, first checkpoint
    baseline = await asyncio.to_thread(tree_rss_mb, server.process.pid)
    peak, stop = [baseline], asyncio.Event()
    sampler = asyncio.create_task(sample_rss(server.process.pid, peak, stop))
    load_before, cpu_before = os.getloadavg()[0], tree_cpu_s(server.process.pid)
    harness_before = own_cpu_s() + tree_cpu_s(args.model_pid)
    started = time.monotonic()
    results = await drive(server, n, args.ramp, args.tokens / args.rate + 120)
    seconds = time.monotonic() - started
    cpu = tree_cpu_s(server.process.pid) - cpu_before
    harness = own_cpu_s() + tree_cpu_s(args.model_pid) - harness_before
    stop.set()
    await sampler
    row = summarise(results, n, args.tokens, baseline, peak[0], seconds, load_before)
    return {**row, "cpu_s": cpu, "cpu_us_per_token": cpu / max(1, sum(len(r.latencies_ms) for r in results)) * 1e6,
            "cores_busy": (cpu + harness) / seconds}


def summarise(results: list[StreamResult], n: int, tokens: int, baseline: float, peak: float, seconds: float,
              load_before: float) -> dict[str, Any]:
    latencies = [ms for r in results for ms in r.latencies_ms.values()]
    failed = sorted((r for r in results if r.error), key=lambda r: r.failed_at)
    rates = [rate for r in results if (rate := r.model_rate()) is not None]
    ttft = [(r.first_at - r.asked_at) * 1000 for r in results if r.first_at is not None]
    return {
        "n": n,
        "intact": sum(1 for r in results if not r.error and len(r.latencies_ms) == tokens and not r.duplicates),
        "p50": percentile(latencies, 50) if latencies else float("nan"),
        "p99": percentile(latencies, 99) if latencies else float("nan"),
        "max": max(latencies) if latencies else float("nan"),
        "lost": sum(tokens - len(r.latencies_ms) for r in results),
        "dup": sum(r.duplicates for r in results),
        "errors": len(failed),
        "mb_per_stream": max(0.0, peak - baseline) / n,
        "peak_mb": peak,
        "gave": failed[0].error if failed else "-",
        "seconds": seconds,
        "model_rate": percentile(rates, 50) if rates else float("nan"),
        "ttft_p50": percentile(ttft, 50) if ttft else float("nan"),
        "ttft_p99": percentile(ttft, 99) if ttft else float("nan"),
        "peak_streaming": peak_overlap([(r.first_at, r.last_at) for r in results if r.first_at and r.last_at]),
        "load": (load_before, os.getloadavg()[0]),
    }


def peak_overlap(spans: list[tuple[float, float]]) -> int:
    """Most streams delivering tokens at one moment: N only if the server admitted every turn
    before the first ones finished (a saturated server starts turns late, and fewer overlap)."""
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    peak = current = 0
    for _, step in edges:
        current += step
        peak = max(peak, current)
    return peak


# --- the run ---


def raise_fd_limit() -> int:
    """Each stream holds a socket in the client and in the server (two for the peer's proxy-free
    setup too): lift the soft limit to the hard one, inherited by the servers we start."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def variants(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(server, chat reader) pairs to measure at each N: Ragline once per reader, the peer once."""
    return [(name, reader) for name in args.servers for reader in (args.readers if name == "ragline" else ["direct"])]


def label(name: str, reader: str, redis: bool, readers: list[str]) -> str:
    text = SERVERS[name].name + (" (redis)" if redis and name == "ragline" else "")
    return text + (f" [{reader} reader]" if name == "ragline" and len(readers) > 1 else "")


def run(args: argparse.Namespace) -> list[tuple[str, dict[str, Any]]]:
    rows: list[tuple[str, dict[str, Any]]] = []
    model, model_url = stamped_model.start(args.tokens, args.rate)
    args.model_pid = model.pid
    redis = None
    if args.redis:
        from tests.redis_server import RedisServer

        redis = RedisServer().start()
    try:
        for n in args.n:
            for _ in range(args.repeat):  # rounds interleave the variants, so a burst of machine load hits all alike
                for name, reader in variants(args):
                    server = SERVERS[name](model_url, n, redis.url if redis and name == "ragline" else None, reader)
                    try:
                        server.start()
                    except RuntimeError as exc:  # one server that fails to start (a tree mid-edit) costs its row, not the run
                        print(f"| {label(name, reader, redis is not None, args.readers)} | {n} | {exc} |", file=sys.stderr)
                        continue
                    try:
                        row = uvloop.run(measure(server, n, args))  # the client's own overhead, as low as it goes
                    finally:
                        server.stop()
                    rows.append((label(name, reader, redis is not None, args.readers), row))
                    print_row(*rows[-1], file=sys.stderr)
    finally:
        model.kill()
        if redis is not None:
            redis.stop()
    return rows


def medians(rows: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """One row per (server, N): the median of each figure over the repeats (counts: their worst)."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for name, row in rows:
        groups.setdefault((name, row["n"]), []).append(row)
    out = []
    for (name, _), group in groups.items():
        merged = dict(group[0])
        for key, value in group[0].items():
            if key in ("lost", "dup", "errors"):
                merged[key] = max(r[key] for r in group)
            elif key == "intact":
                merged[key] = min(r[key] for r in group)
            elif key == "load":
                merged[key] = (percentile([r[key][0] for r in group], 50), percentile([r[key][1] for r in group], 50))
            elif isinstance(value, int | float):
                merged[key] = percentile([r[key] for r in group], 50)
        out.append((f"{name}, median of {len(group)}", merged))
    return out


HEADER = ("| server | N | streams intact | peak streaming | first token p50/p99 s | p50 ms | p99 ms | max ms | lost | dup | errors | MB/stream | peak MB "
          "| gives first | wall s | model tok/s | server CPU s | CPU µs/token | cores busy | load 1m before/after |\n"
          "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |")


def print_row(name: str, r: dict[str, Any], file: Any = sys.stdout) -> None:
    print(f"| {name} | {r['n']} | {r['intact']}/{r['n']} | {r['peak_streaming']} | {r['ttft_p50'] / 1000:.1f} / {r['ttft_p99'] / 1000:.1f} | {r['p50']:.1f} | {r['p99']:.1f} | {r['max']:.0f} | {r['lost']} | "
          f"{r['dup']} | {r['errors']} | {r['mb_per_stream']:.2f} | {r['peak_mb']:.0f} | {r['gave']} | {r['seconds']:.1f} | {r['model_rate']:.1f} | {r['cpu_s']:.1f} | {r['cpu_us_per_token']:.0f} | {r['cores_busy']:.2f} | "
          f"{r['load'][0]:.2f} / {r['load'][1]:.2f} |", file=file, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", default="50,100,200,500,1000", help="concurrent streams, in order")
    parser.add_argument("--tokens", type=int, default=40, help="tokens per answer")
    parser.add_argument("--rate", type=float, default=20.0, help="tokens per second per answer")
    parser.add_argument("--ramp", type=float, default=1.0, help="seconds over which the N streams start")
    parser.add_argument("--servers", default="ragline,langgraph,floor", help="which servers: ragline, langgraph, floor")
    parser.add_argument("--redis", action="store_true", help="Ragline with Redis checkpoints and streams (a local Redis 8)")
    parser.add_argument("--readers", default="direct", help="Ragline's chat stream readers: direct (models/openai_stream.py), litellm")
    parser.add_argument("--repeat", type=int, default=1, help="measure each row this often and add a median row")
    args = parse_args(parser, n="3", tokens=5, rate=50.0, ramp=0.2)
    args.n = [int(n) for n in args.n.split(",") if n]
    args.servers = [s for s in args.servers.split(",") if s]
    args.readers = [r for r in args.readers.split(",") if r]
    fds = raise_fd_limit()
    rows = run(args)
    print(f"\nLoad: N concurrent SSE answers of {args.tokens} tokens at {args.rate:g} tokens/s (stamped scripted model, own "
          f"process), streams started over {args.ramp:g} s; latency = token parsed by the client - token sent by the model; "
          f"{os.cpu_count()} cores, open files {fds}\n")
    print(HEADER)
    for name, row in rows:
        print_row(name, row)
    if args.repeat > 1:
        for name, row in medians(rows):
            print_row(name, row)
    smoke_clean(args, broken(rows, args))


def broken(rows: list[tuple[str, dict[str, Any]]], args: argparse.Namespace) -> list[str]:
    """What a small run must not show: a server that did not start (no row), a stream not intact."""
    problems = [f"{name}, N={row['n']}: {row['n'] - row['intact']} streams not intact, first: {row['gave']}"
                for name, row in rows if row["intact"] < row["n"]]
    expected = len(args.n) * args.repeat * len(variants(args))
    return problems + ([f"{expected - len(rows)} of {expected} rows missing: a server did not start"] if len(rows) < expected else [])


if __name__ == "__main__":
    main()
