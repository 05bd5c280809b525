"""The local default chat model: load time, first-token latency and decode speed.

    python benchmarks/local_model.py [--runs 5]

Prints a table of medians (these machines are noisy); nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from harness import parse_args

from ragline.models.chat import ChatClient, ChatOptions, StreamEnd
from ragline.models.local_engine import LocalChatEngine
from ragline.services import Services
from ragline.settings import get_settings

QUESTIONS = ["What is the capital of France?", "法国的首都是哪里？", "Explain in two sentences what a weather station measures."]


async def one_run(client: ChatClient, engine: LocalChatEngine, question: str, max_tokens: int = 96) -> tuple[float, float, int]:
    started = time.perf_counter()
    first = None
    tokens = 0
    async for item in client.stream([{"role": "user", "content": question}], ChatOptions(temperature=0, max_tokens=max_tokens)):
        if isinstance(item, StreamEnd):
            tokens = item.usage.get("completion_tokens", tokens)
            break
        first = first if first is not None else time.perf_counter() - started
    total = time.perf_counter() - started
    # the local model's stream reports no usage: the tokens are llama.cpp's count, kept by the engine
    return first or 0.0, total, tokens or engine.recent_calls[-1].completion_tokens


async def main(runs: int, questions: int = len(QUESTIONS), max_tokens: int = 96) -> None:
    started = time.perf_counter()
    services = Services.from_settings(get_settings())
    engine = services.local_engines.chat(services.settings.chat_model)
    engine.get()
    load = time.perf_counter() - started
    client = services.chat()
    rows = []
    for question in QUESTIONS[:questions]:
        samples = [await one_run(client, engine, question, max_tokens) for _ in range(runs)]
        first = statistics.median(s[0] for s in samples)
        total = statistics.median(s[1] for s in samples)
        speed = statistics.median(s[2] / (s[1] - s[0]) for s in samples if s[1] > s[0] and s[2])
        rows.append((question[:40], first, total, speed))
    print(f"model {get_settings().chat_model}; load (assemble + verify + mmap) {load:.2f} s; {runs} runs per question, medians")
    print(f"{'question':42} {'first token s':>14} {'answer s':>9} {'tokens/s':>9}")
    for question, first, total, speed in rows:
        print(f"{question:42} {first:14.2f} {total:9.2f} {speed:9.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--questions", type=int, default=len(QUESTIONS), help="the first N questions of the list")
    parser.add_argument("--max-tokens", type=int, default=96)
    args = parse_args(parser, runs=1, questions=1, max_tokens=16)
    asyncio.run(main(args.runs, args.questions, args.max_tokens))
