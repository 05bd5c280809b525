"""SSE delivery: latency from the moment a run appends an event to the moment the client has the
frame (p50/p99), in process and via Redis Streams, and how many concurrent streams one process
holds with zero lost events.

The service runs as `ragline serve` would, in a subprocess (this file's `serve` mode: the real app,
with a StreamManager wrapper that stamps each event with its append time). The chat model is the
scripted OpenAI-compatible test server, streaming fixed chunks at a fixed pace, so every answer is
known in advance and a lost or repeated event shows as a wrong text or a gap in the entry ids.

    python benchmarks/sse_latency.py [--streams 10,50,100,200] [--chunks 40] [--no-redis] [--backends in-process,redis]
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
from typing import Any

from harness import KEEPALIVE_S, ROOT, parse_args, percentile, scripted_env, smoke_clean, sse_frames, stop, wait_healthy

from ragline.checkpoints.streams import Event, Fence, StreamEntry, StreamManager

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

STAMP = "_t_append"  # added to every event by the serve mode; clients ignore unknown keys


# --- serve mode (the subprocess) ---


class StampedStreams(StreamManager):
    """The real StreamManager, recording wall-clock append time in each event. It implements the
    service's StreamManager protocol (checkpoints/streams.py) method by method, so mypy reports a
    change of that protocol here (the `fence` argument once went missing)."""

    def __init__(self, inner: StreamManager) -> None:
        self.inner = inner

    async def append(self, session_id: str, message_id: str, event: Event, fence: Fence | None = None) -> str:
        return await self.inner.append(session_id, message_id, {**event, STAMP: time.time()}, fence)

    def append_soon(self, session_id: str, message_id: str, event: Event, fence: Fence | None = None) -> asyncio.Future[str] | None:
        """What a stage's events go through (service/relay.py): stamped as they are emitted."""
        return self.inner.append_soon(session_id, message_id, {**event, STAMP: time.time()}, fence)

    async def read(self, session_id: str, message_id: str, after: str | None = None) -> list[StreamEntry]:
        return await self.inner.read(session_id, message_id, after)

    async def wait(self, session_id: str, message_id: str, after: str | None, timeout: float) -> list[StreamEntry]:
        return await self.inner.wait(session_id, message_id, after, timeout)

    def valid_id(self, entry_id: str) -> bool:
        return self.inner.valid_id(entry_id)

    async def tell(self, session_id: str, message_id: str, event: Event) -> None:
        await self.inner.tell(session_id, message_id, event)

    async def aclose(self) -> None:
        await self.inner.aclose()


def serve(port: int) -> None:
    import uvicorn
    from starlette.applications import Starlette

    from ragline.api.app import create_app

    app: Starlette = create_app()
    inner_lifespan = app.router.lifespan_context

    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(app_: Starlette):
        async with inner_lifespan(app_):
            backend = app_.state.host.backend
            stamped: StreamManager = StampedStreams(backend.streams)
            backend.streams = stamped
            yield

    app.router.lifespan_context = lifespan
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=2)


# --- client mode ---


async def one_turn(client: Any, expected: str, latencies: list[float]) -> tuple[bool, int]:
    """One session and one question; returns (nothing lost, frames received)."""
    async with client.post("/api/v1/sessions", json={"title": "bench"}) as created:
        sid = (await created.json())["id"]
    text, entries, complete = "", [], False
    try:
        async with client.post(f"/api/v1/sessions/{sid}/chat", json={"query": "go", "rewrite_enabled": False}) as response:
            async for frame in sse_frames(response):
                now = time.time()
                event = json.loads(frame.data)
                latencies.append((now - event[STAMP]) * 1000)
                entries.append(frame.id.rpartition(":")[2])
                if event["response_type"] == "answer":
                    text += event.get("content", "")
                complete = complete or event["response_type"] == "complete"
    except Exception as exc:  # where it broke tells a dropped connection from a lost frame
        raise RuntimeError(f"chat request, after {len(entries)} frames: {type(exc).__name__}: {exc}") from exc
    ordered = entries == sorted(entries, key=_entry_key) and len(set(entries)) == len(entries)
    contiguous = not entries[0].isdigit() or [int(e) for e in entries] == list(range(1, len(entries) + 1))
    if not (complete and ordered and contiguous and text == expected):
        raise AssertionError(f"stream broken: complete={complete} ordered={ordered} contiguous={contiguous} text={text[:60]!r}...")
    return True, len(entries)


def _entry_key(entry: str) -> tuple[int, ...]:
    return tuple(int(part) for part in entry.split("-"))


async def measure(url: str, streams: int, expected: str, repeats: int = 1) -> dict[str, Any]:
    """`streams` turns at once, `repeats` times. The client reads with aiohttp, as load.py's does:
    httpx's CPU per chunk grows with the connections open, and its lag would count as latency."""
    import aiohttp

    latencies: list[float] = []
    ok = frames = 0
    failures: list[str] = []
    started = time.monotonic()
    connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=KEEPALIVE_S)
    async with aiohttp.ClientSession(base_url=url, connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as client:
        for _ in range(repeats):
            results = await asyncio.gather(*(one_turn(client, expected, latencies) for _ in range(streams)), return_exceptions=True)
            for result in results:
                if isinstance(result, BaseException):
                    failures.append(f"{type(result).__name__}: {result}")
                else:
                    ok += result[0]
                    frames += result[1]
    return {
        "streams": streams * repeats,
        "concurrent": streams,
        "intact": ok,
        "frames": frames,
        "p50": statistics.median(latencies) if latencies else float("nan"),
        "p99": percentile(latencies, 99) if latencies else float("nan"),
        "seconds": time.monotonic() - started,
        "failures": failures,
    }


def start_server(env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen([sys.executable, __file__, "serve", "--port", str(port)], cwd=ROOT, env={**os.environ, **env})
    wait_healthy(process, f"http://127.0.0.1:{port}/health", timeout_s=90)
    return process


def run(args: argparse.Namespace) -> None:
    from tests.redis_server import RedisServer, free_port, missing_reason
    from tests.scripted_model import Reply, ScriptedModel

    model = ScriptedModel().start()
    words = [f"w{i}" for i in range(args.chunks)]
    model.default = Reply.text(" ".join(words), chunk_delay=args.delay)
    expected = " ".join(words)
    base_env = scripted_env(model.base_url)
    backends: list[tuple[str, dict[str, str]]] = []
    if "in-process" in args.backends:
        backends.append(("in-process", {"RAGLINE_CHECKPOINTER": "memory", "RAGLINE_STREAM_MANAGER": "memory"}))
    redis = None
    if "redis" in args.backends and not args.no_redis and missing_reason() is None:
        redis = RedisServer().start()
        backends.append(("redis", {"RAGLINE_REDIS_URL": redis.url, "RAGLINE_CHECKPOINTER": "redis", "RAGLINE_STREAM_MANAGER": "redis"}))
    rows: list[tuple[str, dict[str, Any]]] = []
    try:
        for name, env in backends:
            port = free_port()
            server = start_server({**base_env, **env}, port)
            url = f"http://127.0.0.1:{port}"
            try:
                asyncio.run(measure(url, 2, expected))  # warm-up: imports, connections, first checkpoint
                rows.append((name, asyncio.run(measure(url, 1, expected, repeats=args.sequential))))
                for streams in args.streams:
                    result = asyncio.run(measure(url, streams, expected))
                    rows.append((name, result))
                    if result["intact"] < result["streams"]:
                        break
            finally:
                stop(server, grace_s=15)
    finally:
        model.stop()
        if redis is not None:
            redis.stop()
    print(f"\nSSE delivery, append -> client frame; answers of {args.chunks} chunks every {args.delay * 1000:.0f} ms "
          f"(scripted model), one process, {os.cpu_count()} cores\n")
    print("| backend | concurrent streams | streams intact | frames | latency p50 ms | latency p99 ms | wall s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, r in rows:
        print(f"| {name} | {r['concurrent']} | {r['intact']}/{r['streams']} | {r['frames']} | {r['p50']:.2f} | {r['p99']:.2f} | {r['seconds']:.1f} |")
    for name, r in rows:
        for failure in sorted(set(r["failures"])):  # why a stream was not intact, once per distinct cause
            print(f"- {name}, {r['concurrent']} streams: {failure[:300]}")
    smoke_clean(args, [f"{name}, {r['concurrent']} streams: {failure}" for name, r in rows for failure in r["failures"]])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="mode")
    serve_mode = sub.add_parser("serve")
    serve_mode.add_argument("--port", type=int, required=True)
    parser.add_argument("--streams", default="10,50,100,200", help="concurrency levels to try, in order")
    parser.add_argument("--chunks", type=int, default=40, help="answer chunks per stream")
    parser.add_argument("--delay", type=float, default=0.02, help="seconds between chunks")
    parser.add_argument("--sequential", type=int, default=10, help="single-stream turns for the idle latency row")
    parser.add_argument("--no-redis", action="store_true")
    parser.add_argument("--backends", default="in-process,redis", help="which backends to measure, in order")
    args = parse_args(parser, streams="3", chunks=5, delay=0.01, sequential=2)
    if args.mode == "serve":
        serve(args.port)
        return
    args.streams = [int(n) for n in args.streams.split(",") if n]
    run(args)


if __name__ == "__main__":
    main()
