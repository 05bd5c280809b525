"""The doors under load: N concurrent answers streamed through the OpenAI-compatible door
(`POST /v1/chat/completions`, `stream: true`) beside the same N through the native SSE route
(`POST /api/v1/sessions/{id}/chat`), on fresh `ragline serve` processes over the same stamped
model. Everything is benchmarks/load.py's (the model, the ramp, the latency of every token, the
server's CPU and memory); this adds the door's client and the p99 ratio door / native, whose goal
is at most 1.2x.

Both ask the same turn (`rewrite_enabled: false`: one model call, the answer). The native client
opens its session first and its first-token time includes that request; the door opens the
session itself. `--repeat K` interleaves the two K times and adds median rows: on a shared machine
single runs are noisy.

    python benchmarks/door_load.py [--n 500] [--tokens 40] [--rate 20] [--ramp 1] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import load
from harness import parse_args, smoke_clean, sse_frames
from load_servers import SERVERS, RaglineServer, StreamResult

DOOR_BODY = {"model": "ragline", "messages": [{"role": "user", "content": "go"}], "stream": True,
             "ragline": {"request": {"rewrite_enabled": False}}}
GOAL = 1.2


class OpenAIDoor(RaglineServer):
    name = "ragline OpenAI door (/v1/chat/completions)"

    async def ask(self, client: Any, result: StreamResult) -> None:
        async with client.post(f"{self.url}/v1/chat/completions", json=DOOR_BODY) as response:
            if response.status != 200:
                return result.fail(f"chat/completions: HTTP {response.status}")
            async for frame in sse_frames(response):
                if frame.data == "[DONE]":
                    break
                payload = json.loads(frame.data)
                if "error" in payload:
                    return result.fail(f"error chunk: {payload['error'].get('message', '')}")
                for choice in payload.get("choices") or ():
                    content = choice["delta"].get("content")
                    if content:
                        result.feed(content, time.time())


SERVERS["openai"] = OpenAIDoor
NATIVE = SERVERS["ragline"].name


def _is(name: str, server: str) -> bool:
    return name == server or name.startswith(f"{server}, median")


def ratios(rows: list[tuple[str, dict[str, Any]]]) -> list[tuple[int, float, float]]:
    """(N, native p99, door p99) per N, from the rows given (the medians when there are)."""
    native = {row["n"]: row["p99"] for name, row in rows if _is(name, NATIVE)}
    door = {row["n"]: row["p99"] for name, row in rows if _is(name, OpenAIDoor.name)}
    return [(n, native[n], door[n]) for n in sorted(native) if n in door]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", default="500", help="concurrent streams, in order")
    parser.add_argument("--tokens", type=int, default=40, help="tokens per answer")
    parser.add_argument("--rate", type=float, default=20.0, help="tokens per second per answer")
    parser.add_argument("--ramp", type=float, default=1.0, help="seconds over which the N streams start")
    parser.add_argument("--repeat", type=int, default=1, help="measure each row this often and add median rows")
    args = parse_args(parser, n="3", tokens=5, rate=50.0, ramp=0.2)
    args.n = [int(n) for n in args.n.split(",") if n]
    args.servers, args.readers, args.redis = ["ragline", "openai"], ["direct"], False
    fds = load.raise_fd_limit()
    rows = load.run(args)
    summary = load.medians(rows) if args.repeat > 1 else rows
    print(f"\nDoors: N concurrent answers of {args.tokens} tokens at {args.rate:g} tokens/s (stamped model, own process), "
          f"started over {args.ramp:g} s; latency = token parsed by the client - token sent by the model; "
          f"{os.cpu_count()} cores, open files {fds}\n")
    print(load.HEADER)
    for name, row in rows + (summary if args.repeat > 1 else []):
        load.print_row(name, row)
    print("\n| N | native SSE p99 ms | OpenAI door p99 ms | door / native | goal |\n| ---: | ---: | ---: | ---: | --- |")
    for n, native, door in ratios(summary):
        print(f"| {n} | {native:.1f} | {door:.1f} | {door / native:.2f}x | <= {GOAL}x: {'met' if door / native <= GOAL else 'NOT met'} |")
    smoke_clean(args, load.broken(rows, args))


if __name__ == "__main__":
    main()
