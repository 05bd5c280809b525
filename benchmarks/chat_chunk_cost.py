"""What one streamed chunk of a remote chat model costs the process that reads it: CPU time per
chunk through Ragline's ChatClient (litellm and the OpenAI SDK underneath) against reading the
same Server-Sent Events with httpx and json alone. The model is benchmarks/stamped_model.py in
its own process, streaming as fast as it can, so only the reader's CPU is counted.

This is the floor under benchmarks/load.py: a server relaying N streams at 20 tokens/s spends
N * 20 * (this cost) CPU seconds per second on reading its model alone.

    python benchmarks/chat_chunk_cost.py [--chunks 400] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections.abc import Awaitable, Callable

import stamped_model
from harness import parse_args, percentile

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ASK = [{"role": "user", "content": "go"}]


async def through_chat_client(base_url: str, direct: bool = False) -> int:
    from ragline.models.chat import ChatClient

    items = 0
    async for _ in ChatClient("openai/scripted", base_url, "k", direct=direct).stream(ASK):
        items += 1
    return items


async def through_chat_client_direct(base_url: str) -> int:
    return await through_chat_client(base_url, direct=True)


async def through_httpx(base_url: str) -> int:
    import httpx

    items = 0
    body = {"model": "scripted", "stream": True, "messages": ASK}
    async with httpx.AsyncClient() as client, client.stream("POST", f"{base_url}/chat/completions", json=body) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: {"):
                json.loads(line[6:])
                items += 1
    return items


async def cpu_per_item(read: Callable[[str], Awaitable[int]], base_url: str) -> float:
    started = time.process_time()
    items = await read(base_url)
    return (time.process_time() - started) / items * 1e6


async def main(args: argparse.Namespace) -> None:
    model, base_url = stamped_model.start(args.chunks, rate=1e6)
    try:
        readers = {"ChatClient (litellm + OpenAI SDK)": through_chat_client,
                   "ChatClient (models/openai_stream.py: aiohttp + orjson)": through_chat_client_direct, "httpx + json": through_httpx}
        costs: dict[str, list[float]] = {name: [] for name in readers}
        for _ in range(args.rounds + 1):  # the first round pays imports and connection set-up
            for name, read in readers.items():
                costs[name].append(await cpu_per_item(read, base_url))
    finally:
        model.kill()
    print(f"\nCPU per streamed chunk, {args.chunks} chunks, median of {args.rounds} rounds after a warm-up, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.2f}\n")
    print("| reader | µs CPU per chunk |\n| --- | ---: |")
    for name, values in costs.items():
        print(f"| {name} | {percentile(values[1:], 50):.0f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    asyncio.run(main(parse_args(parser, chunks=20, rounds=1)))
