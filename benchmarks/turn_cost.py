"""What one plain-chat turn costs `ragline serve` in CPU, with C turns in flight at a time.

The load benchmark (benchmarks/load.py) starts N answers within a second: its figures mix what a
turn costs with how the turns happened to overlap (a server whose turns overlap less streams
fewer tokens per pass of its event loop, and spends more per token). This one keeps exactly C
turns in flight, each a new session and one answer of --tokens tokens from the stamped scripted
model (benchmarks/stamped_model.py, its own process), for --turns turns after a warm-up, and reads
the server's CPU seconds from /proc: CPU per turn, whatever else the machine does. Wall time per
turn is what C clients waited. Each C is measured --repeat times with a fresh server, the rounds
interleaved, and the median row comes last.

    python benchmarks/turn_cost.py [--conc 1,4,32] [--turns 400] [--tokens 2] [--rate 1000] [--repeat 3] [--redis]

Server settings come from the environment as for any `ragline serve` (RAGLINE_*); like the load
benchmark's, the server keeps checkpoints and streams in memory, or with --redis in a local Redis 8
(its own process: its CPU is not counted).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import aiohttp
import stamped_model
import uvloop
from harness import parse_args, smoke_clean, tree_cpu_s
from load_servers import RaglineServer, StreamResult

from tests.redis_server import RedisServer


async def measure(server: RaglineServer, conc: int, turns: int) -> dict[str, float]:
    assert server.process is not None
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as client:
        for _ in range(10):  # warm-up: imports, the first model connection, the first checkpoint
            await server.ask(client, StreamResult())
        left, failed = turns, 0

        async def one_client() -> None:
            nonlocal left, failed
            while left > 0:
                left -= 1
                result = StreamResult()
                await server.ask(client, result)
                failed += result.error is not None

        cpu_before, started = tree_cpu_s(server.process.pid), time.monotonic()
        await asyncio.gather(*(one_client() for _ in range(conc)))
        cpu, wall = tree_cpu_s(server.process.pid) - cpu_before, time.monotonic() - started
    return {"cpu_ms": cpu / turns * 1000, "wall_ms": wall / turns * conc * 1000, "failed": failed}


def print_row(label: str, conc: int, row: dict[str, float]) -> None:
    print(f"| {label} | {conc} | {row['cpu_ms']:.2f} | {row['wall_ms']:.1f} | {row['failed']:.0f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conc", default="1,4,32", help="turns in flight at a time, in order")
    parser.add_argument("--turns", type=int, default=400, help="turns measured per row")
    parser.add_argument("--tokens", type=int, default=2, help="tokens per answer")
    parser.add_argument("--rate", type=float, default=1000.0, help="tokens per second per answer")
    parser.add_argument("--repeat", type=int, default=3, help="rows per C (fresh servers, interleaved); then their median")
    parser.add_argument("--redis", action="store_true", help="checkpoints and streams in a local Redis 8")
    args = parse_args(parser, conc="2", turns=4, repeat=1)
    levels = [int(c) for c in args.conc.split(",") if c]
    model, model_url = stamped_model.start(args.tokens, args.rate)
    rows: dict[int, list[dict[str, float]]] = {c: [] for c in levels}
    redis = RedisServer().start() if args.redis else None
    print(f"Plain-chat turns of {args.tokens} tokens at {args.rate:g} tokens/s, {args.turns} per row; "
          f"checkpoints and streams {'in Redis' if args.redis else 'in memory'}; CPU: the server's process tree; wall: what each client waited per turn\n")
    print("| row | turns in flight | server CPU ms/turn | wall ms/turn | failed |\n| --- | ---: | ---: | ---: | ---: |")
    try:
        for round_number in range(args.repeat):
            for conc in levels:
                server = RaglineServer(model_url, conc, redis.url if redis else None)
                server.start()
                try:
                    row: dict[str, Any] = uvloop.run(measure(server, conc, args.turns))
                finally:
                    server.stop()
                rows[conc].append(row)
                print_row(f"round {round_number + 1}", conc, row)
    finally:
        model.kill()
        if redis is not None:
            redis.stop()
    for conc, measured in rows.items():
        median = {key: statistics.median(r[key] for r in measured) for key in ("cpu_ms", "wall_ms")}
        print_row(f"median of {len(measured)}", conc, {**median, "failed": sum(r["failed"] for r in measured)})
    smoke_clean(args, [f"{conc} in flight: {sum(r['failed'] for r in measured):.0f} turns failed" for conc, measured in rows.items()
                       if sum(r["failed"] for r in measured)])


if __name__ == "__main__":
    main()
