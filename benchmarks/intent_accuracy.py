"""First-turn intent: embedded exemplars against the LLM's rewrite call, on a labelled set.

    python benchmarks/intent_accuracy.py [--no-llm]

benchmarks/data/intents.jsonl holds 76 first-turn questions labelled greeting, chitchat or
kb_search (questions about the sample manual, and questions sampled from the shared XQuAD and
CMRC sets). For each classifier it prints the accuracy, the accuracy of the decision that matters
on a first turn (search or not), and the median time per question. Misclassified questions are
listed below the table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path

from harness import parse_args

DATA = Path(__file__).with_name("data") / "intents.jsonl"
SEARCH = {"kb_search", "", "summarize", "clarification"}


async def exemplar_labels(questions: list[str]) -> tuple[list[str], list[float]]:
    from ragline.models.intents import ExemplarIntents
    from ragline.services import Services

    services = Services.from_settings()
    classifier = ExemplarIntents(services.embedder)
    await classifier.classify("warm-up", web_search=False)
    labels, times = [], []
    for question in questions:
        started = time.perf_counter()
        labels.append((await classifier.classify(question, web_search=False)).intent)
        times.append(time.perf_counter() - started)
    return labels, times


async def llm_labels(questions: list[str]) -> tuple[list[str], list[float]]:
    from ragline.contracts.request import PipelineRequest
    from ragline.nodes.query_understand import understand
    from ragline.services import Services

    services = Services.from_settings()
    labels, times = [], []
    for question in questions:
        state = {"request": PipelineRequest(query=question), "history": []}
        started = time.perf_counter()
        labels.append((await understand(state, services)).intent)  # type: ignore[arg-type]
        times.append(time.perf_counter() - started)
    return labels, times


def report(name: str, gold: list[str], labels: list[str], times: list[float], questions: list[str]) -> list[str]:
    exact = sum(g == p for g, p in zip(gold, labels, strict=True)) / len(gold)
    routing = sum((g in SEARCH) == (p in SEARCH) for g, p in zip(gold, labels, strict=True)) / len(gold)
    print(f"{name:22} {exact:9.3f} {routing:17.3f} {statistics.median(times):12.3f}")
    return [f"{name}: {q!r} gold={g} got={p or '(none)'}" for q, g, p in zip(questions, gold, labels, strict=True)
            if (g in SEARCH) != (p in SEARCH)]


async def main(with_llm: bool, limit: int = 0) -> None:
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]
    if limit:  # spread over the file, which is grouped by label
        rows = rows[:: max(1, len(rows) // limit)][:limit]
    questions, gold = [r["question"] for r in rows], [r["intent"] for r in rows]
    print(f"{len(rows)} labelled first-turn questions ({DATA.name})")
    print(f"{'classifier':22} {'accuracy':>9} {'search-or-not acc':>17} {'median s':>12}")
    misses = report("embedded exemplars", gold, *await exemplar_labels(questions), questions)
    if with_llm:
        misses += report("LLM (rewrite call)", gold, *await llm_labels(questions), questions)
    for line in misses:
        print("  miss:", line)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-llm", action="store_true", help="skip the (slow) LLM classifier")
    parser.add_argument("--limit", type=int, default=0, help="this many of the questions (0: all)")
    args = parse_args(parser, limit=2)
    asyncio.run(main(not args.no_llm, args.limit))
