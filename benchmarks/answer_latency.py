"""Where the time of one answer goes, on the embedded default (local model, sample knowledge base).

    python benchmarks/answer_latency.py [--runs 2] [--no-prompt-cache] [--model-intent] [--no-budget] [--no-raw]

Asks the conversations below through the full `ragline` graph, as `ragline ask --sample` does,
after one warm-up question: each a first question (turn 1), then a follow-up in the same session
(turn 2), some of which refer back to turn 1 and need the rewrite, some of which stand on their
own. Turn 1 and turn 2 are reported side by side, with the ratio of their p50 first tokens (the
goal of issue 30: turn 2 within 2x turn 1), and turn 2 split by whether its follow-up refers
back. From the events' arrival times it reports p50/p95 of query understanding,
search and merge, the first answer token and the complete answer; from llama.cpp's counters the
answer prompt's tokens (and how many came from the prompt cache). Beside them it replays each
very same answer prompt on the bare model: the raw time to the first token for the uncached
tokens, for the whole prompt, and the decode rate. So the pipeline's own overhead shows as a
ratio. Medians are quoted because these machines are noisy; nothing here is pass/fail.

The flags turn the levers of the embedded default off one by one (all three off is the pipeline
before they existed): the prompt cache, the first-turn intent without a model call, and the
passage token budget.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from harness import parse_args

# (first question, follow-up, whether the follow-up refers back to the first turn)
PAIRS = [
    ("What battery does the outdoor sensor use?", "And how long does it last?", True),
    ("How long does pairing the Aurora sensor take?", "How do I reset the rainfall total?", False),
    ("How often does the sensor send readings to the console?", "And how often does it upload them to the cloud?", True),
    ("Why does the console show dashes instead of outdoor readings?", "Which Wi-Fi networks does the console support?", False),
    ("How high above the ground should the sensor mast be mounted?", "What is its radio range through walls?", True),
    ("Which Wi-Fi networks does the console support?", "What does a fall of more than 3 hPa in three hours mean?", False),
    ("What does a fall of more than 3 hPa in three hours mean?", "What about a rise?", True),
    ("How do I reset the rainfall total?", "How long is the warranty on the console?", False),
]


@dataclass
class Turn:
    started: float
    marks: dict[str, float] = field(default_factory=dict)

    def mark(self, name: str) -> None:
        self.marks.setdefault(name, time.perf_counter() - self.started)


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))] if ordered else float("nan")


async def ask(graph: Any, services: Any, kb_id: str, question: str, session_id: str | None = None, max_tokens: int | None = None) -> Turn:
    from ragline.contracts.context import RunContext, RunHost
    from ragline.contracts.events import ResponseType
    from ragline.contracts.request import PipelineRequest, SummaryConfig
    from ragline.graph.turn import stream_turn

    request = PipelineRequest(query=question, knowledge_base_ids=(kb_id,), summary=SummaryConfig(max_tokens=max_tokens))
    context = RunContext(session_id=session_id or str(uuid.uuid4()), host=RunHost(services=services))
    turn = Turn(time.perf_counter())
    async for event in stream_turn(graph, request, context):
        kind, window = event.response_type, (event.data or {}).get("tool_name") or (event.data or {}).get("window")
        if kind in (ResponseType.TOOL_CALL, ResponseType.TOOL_RESULT) and window:
            turn.mark(f"{window}:{'open' if kind == ResponseType.TOOL_CALL else 'close'}")
        elif kind == ResponseType.ANSWER and event.content:
            turn.mark("first_token")
        elif kind == ResponseType.COMPLETE:
            turn.mark("complete")
    return turn


def raw_timings(messages: list[dict], decode_tokens: int = 32) -> tuple[float, float, float, int, int]:
    """(first token of the uncached tail, first token of the whole prompt, decode tokens/s, prompt tokens, cached)."""
    from ragline.models.prompt_cache import PrefixCache, _formatter, _tokens
    from ragline.services import Services
    from ragline.settings import get_settings

    services = Services.from_settings(get_settings())
    engine = services.local_engines.chat(services.settings.chat_model)
    llm = engine.get()
    with engine.generate_lock:
        tokens = _tokens(llm, _formatter(llm), messages)
        cache = PrefixCache(llm, None, "raw")
        cached = cache.prime(messages)
        started = time.perf_counter()
        llm.eval(tokens[cached:])
        token = llm.sample(temp=0)
        tail = time.perf_counter() - started
        llm.reset()
        llm._ctx.kv_cache_clear()
        started = time.perf_counter()
        llm.eval(tokens)
        token = llm.sample(temp=0)
        whole = time.perf_counter() - started
        started = time.perf_counter()
        for _ in range(decode_tokens):
            llm.eval([token])
            token = llm.sample(temp=0)
        rate = decode_tokens / (time.perf_counter() - started)
        llm.reset()
        llm._ctx.kv_cache_clear()
    return tail, whole, rate, len(tokens), cached


def measured(turn: Turn, captured: list[list[dict]], engine: Any, raw: bool, decode_tokens: int = 32) -> dict[str, float]:
    """One turn's row: the events' marks, the answer call's counters, and its prompt replayed raw."""
    stats = engine.recent_calls[-1]
    nan = float("nan")
    tail, whole, rate, tokens, cached = raw_timings(captured[-1], decode_tokens) if raw else (nan, nan, nan, 0, 0)
    marks = turn.marks
    return {
        "understand": marks.get("query_understand:close", 0) - marks.get("query_understand:open", 0),
        "search": marks.get("knowledge_search:close", 0) - marks.get("knowledge_search:open", 0),
        "first_token": marks.get("first_token", float("nan")),
        "complete": marks.get("complete", float("nan")),
        "model_calls": len(captured),
        "prompt_tokens": stats.prompt_tokens,
        "cached_tokens": stats.cached_tokens,
        "raw_tail": tail,
        "raw_whole": whole,
        "raw_decode": rate,
        "prefill_rate": (tokens - cached) / tail if tail else float("nan"),
    }


MEASURES = [
    ("understand", "query understanding s"),
    ("search", "search + merge s"),
    ("first_token", "first answer token s"),
    ("complete", "complete answer s"),
    ("model_calls", "model calls per answer"),
    ("prompt_tokens", "answer prompt tokens"),
    ("cached_tokens", "...of them from the prompt cache"),
    ("raw_tail", "raw: first token, uncached part s"),
    ("raw_whole", "raw: first token, whole prompt s"),
    ("raw_decode", "raw: decode tokens/s"),
    ("prefill_rate", "raw: prefill tokens/s"),
]


def _p50(rows: list[dict[str, float]], key: str) -> float:
    return statistics.median(row[key] for row in rows) if rows else float("nan")


def report(first: list[dict[str, float]], second: list[dict[str, float]], refers: list[bool]) -> None:
    """p50 and p95 of turn 1 and turn 2 side by side, turn 2's first token by kind, and the ratio."""
    print(f"{'measure':34} {'t1 p50':>8} {'t1 p95':>8} {'t2 p50':>8} {'t2 p95':>8}")
    for key, label in MEASURES:
        ones, twos = [row[key] for row in first], [row[key] for row in second]
        print(f"{label:34} {statistics.median(ones):8.2f} {_percentile(ones, 0.95):8.2f} {statistics.median(twos):8.2f} {_percentile(twos, 0.95):8.2f}")
    ratio = statistics.median(row["first_token"] / row["raw_tail"] for row in first + second)
    print(f"{'first token / raw uncached (ratio)':34} {ratio:8.2f}")
    back = [row for row, flag in zip(second, refers, strict=True) if flag]
    alone = [row for row, flag in zip(second, refers, strict=True) if not flag]
    print(f"turn 2 first token p50: referring back {_p50(back, 'first_token'):.2f} s ({len(back)}), "
          f"standing alone {_p50(alone, 'first_token'):.2f} s ({len(alone)}); "
          f"model calls p50 {_p50(back, 'model_calls'):.0f} / {_p50(alone, 'model_calls'):.0f}")
    print(f"turn 2 / turn 1 first token (p50): {_p50(second, 'first_token') / _p50(first, 'first_token'):.2f}x")


async def main(runs: int, raw: bool = True, pairs: int = len(PAIRS), max_tokens: int | None = None, decode_tokens: int = 32,
               raw_first_only: bool = False) -> None:
    from ragline.checkpoints.savers import memory_saver
    from ragline.graph.graphs import build_graph
    from ragline.ingestion.sample import ensure_sample_kb
    from ragline.models.local_engine import Generate
    from ragline.services import Services

    load_at_start = os.getloadavg()[0]
    services = Services.from_settings()
    engine = services.local_engines.chat(services.settings.chat_model)
    stack = await asyncio.to_thread(lambda: services.retrieval)
    kb_id = (await ensure_sample_kb(stack)).id
    graph = build_graph("ragline", checkpointer=memory_saver())
    captured: list[list[dict]] = []
    generate: Generate = engine.generate  # the engine's method, as models/local_engine.py's protocol says

    def recording(messages: list, kwargs: dict[str, Any], *, stream: bool) -> Generator[dict[str, Any], None, None]:
        captured.append(messages)
        return generate(messages, kwargs, stream=stream)

    wrapped: Generate = recording
    engine.generate = wrapped  # type: ignore[method-assign]  # the assignment only: the signatures are checked above
    await ask(graph, services, kb_id, "What does the Aurora measure?", max_tokens=max_tokens)  # warm-up: model, embedder, index
    first: list[dict[str, float]] = []
    second: list[dict[str, float]] = []
    refers: list[bool] = []
    for _ in range(runs):
        for question, follow_up, refers_back in PAIRS[:pairs]:
            session = str(uuid.uuid4())
            for rows, text in ((first, question), (second, follow_up)):
                captured.clear()
                turn = await ask(graph, services, kb_id, text, session, max_tokens)
                rows.append(measured(turn, captured, engine, raw and not (raw_first_only and rows is second), decode_tokens))
            refers.append(refers_back)
    await services.aclose()
    settings = services.settings
    print(f"{len(first)} conversations of two turns ({runs} x {pairs}), sample KB, local model, "
          f"threads={os.environ.get('RAGLINE_LOCAL_CHAT_THREADS', 'all')}, "
          f"prompt cache {'on' if settings.local_prompt_cache else 'off'}, first-turn intent: {settings.first_turn_intent}, "
          f"budget: {'none' if settings.context_token_budget == 0 else 'default'}, load average (1 min) {load_at_start:.2f} at start, {os.getloadavg()[0]:.2f} at the end")
    report(first, second, refers)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--no-prompt-cache", action="store_true", help="evaluate every prompt in full")
    parser.add_argument("--model-intent", action="store_true", help="first turns make the rewrite call too")
    parser.add_argument("--no-budget", action="store_true", help="no passage token budget (rerank top-k only)")
    parser.add_argument("--no-raw", action="store_true", help="skip replaying each answer prompt on the bare model (half the run time)")
    parser.add_argument("--pairs", type=int, default=len(PAIRS), help="the first N conversations of the list")
    parser.add_argument("--max-tokens", type=int, help="cap each answer (default: the model's own limit)")
    parser.add_argument("--raw-decode", type=int, default=32, help="tokens decoded in each raw replay")
    parser.add_argument("--raw-first-only", action="store_true", help="replay the first turns' prompts only (turn 2's raw rows: nan)")
    arguments = parse_args(parser, runs=1, pairs=1, max_tokens=16, raw_decode=4, raw_first_only=True)
    if arguments.no_prompt_cache:
        os.environ["RAGLINE_LOCAL_PROMPT_CACHE"] = "false"
    if arguments.model_intent:
        os.environ["RAGLINE_FIRST_TURN_INTENT"] = "model"
    if arguments.no_budget:
        os.environ["RAGLINE_CONTEXT_TOKEN_BUDGET"] = "0"
    asyncio.run(main(arguments.runs, raw=not arguments.no_raw, pairs=arguments.pairs, max_tokens=arguments.max_tokens,
                     decode_tokens=arguments.raw_decode, raw_first_only=arguments.raw_first_only))
