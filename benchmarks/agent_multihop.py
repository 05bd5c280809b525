"""Pipeline mode against agent mode on multi-hop questions, with the same chat model (issue 28).

    python benchmarks/agent_multihop.py [--data ../shared/data/eval/musique_100] [--questions 20] [--seed 0] [--model MODEL]

The questions are sampled as `ragline eval --answers --seed` samples them, over the knowledge base
that command builds for the set (one chunk per paragraph, cached and shared with it). Each is asked
twice on a fresh session: through the `ragline` graph (pipeline mode), and through `ragline_agent`
(agent mode, offered search_knowledge and read_chunks). Per mode: exact match and token F1 against
the gold answers (on the answer's text, citations stripped), the share containing a gold answer,
the share ending in "not found", tool calls per answer, and the p50 of the first answer token and
of the complete answer. Agent mode needs a model with tool calling: with the local model (the
default) its row says it was not run. Medians are quoted; these machines are noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import parse_args, smoke_set

AGENT_TOOLS = ("search_knowledge", "read_chunks")


@dataclass
class Asked:
    answer: str = ""
    tool_calls: int = 0
    fallback: bool = False
    error: str | None = None
    first_token_s: float | None = None
    complete_s: float = 0.0


@dataclass
class Row:
    mode: str
    asked: list[tuple[Any, Asked]] = field(default_factory=list)
    skipped: str = ""


async def ask(graph: Any, services: Any, request: Any, tenant: str, agent_tools: tuple[str, ...]) -> Asked:
    from ragline.contracts.context import RunContext, RunHost
    from ragline.contracts.events import ResponseType
    from ragline.graph.turn import stream_turn

    session_id = str(uuid.uuid4())
    context = RunContext(session_id=session_id, tenant_id=tenant, user_id=tenant, agent_tools=agent_tools, host=RunHost(services=services))
    asked = Asked()
    started = time.perf_counter()
    async for event in stream_turn(graph, request, context):
        kind = event.response_type
        if kind == ResponseType.ANSWER and event.content:
            asked.first_token_s = asked.first_token_s or time.perf_counter() - started
            asked.answer = event.content if (event.data or {}).get("replace") else asked.answer + event.content
        elif kind == ResponseType.THINKING and (event.data or {}).get("thought"):
            asked.answer = ""  # the round's introduction was superseded by its tool call
        elif kind == ResponseType.TOOL_CALL and agent_tools:  # the pipeline's are its progress cards
            asked.tool_calls += 1
        elif kind == ResponseType.ERROR:
            asked.error = event.content or "error"
    asked.complete_s = time.perf_counter() - started
    state = await graph.aget_state({"configurable": {"thread_id": session_id}})
    asked.fallback = bool(getattr((state.values or {}).get("chat_response"), "fallback", False))
    return asked


def _p50(values: list[float]) -> str:
    return f"{statistics.median(values):.1f}" if values else "-"


def table(rows: list[Row]) -> str:
    from ragline.evaluation import scoring

    lines = [f"{'mode':9} {'n':>3} {'EM':>6} {'F1':>6} {'gold in':>7} {'not found':>9} {'tools/q':>7} {'first p50 s':>11} {'done p50 s':>10}"]
    for row in rows:
        if row.skipped:
            lines.append(f"{row.mode:9} not run: {row.skipped}")
            continue
        texts = [(question, scoring.strip_tags(asked.answer), asked) for question, asked in row.asked]
        n = len(texts)
        em = sum(scoring.best_exact_match(text, q.answers) for q, text, _ in texts) / n
        f1 = sum(scoring.best_f1(text, q.answers) for q, text, _ in texts) / n
        gold = sum(scoring.contains_any(text, q.answers) for q, text, _ in texts) / n
        fallback = sum(a.fallback for _, _, a in texts) / n
        tools = sum(a.tool_calls for _, _, a in texts) / n
        firsts = [a.first_token_s for _, _, a in texts if a.first_token_s is not None]
        lines.append(f"{row.mode:9} {n:>3} {em:6.3f} {f1:6.3f} {gold:7.2f} {fallback:9.2f} {tools:7.2f} {_p50(firsts):>11} "
                     f"{_p50([a.complete_s for _, _, a in texts]):>10}")
    errors = sum(1 for row in rows for _, asked in row.asked if asked.error)
    return "\n".join(lines) + (f"\n({errors} turns ended in an error)" if errors else "")


async def main(data: Path, questions: int, seed: int, model: str | None, max_tokens: int | None = None) -> None:
    from ragline.checkpoints.savers import memory_saver
    from ragline.contracts.request import SummaryConfig
    from ragline.evaluation.answers import (
        AnswerEvalOptions,
        build_request,
        ensure_kb,
        load_qa_set,
        sample_questions,
        warm_up,
    )
    from ragline.graph.agent import build_agent_graph
    from ragline.graph.graphs import build_graph
    from ragline.models.chat import LOCAL_TOOLS_REFUSAL
    from ragline.services import Services

    services = Services.from_settings()
    try:
        options = AnswerEvalOptions(limit=questions, seed=seed)
        qa = load_qa_set(data)
        kb, _ = await ensure_kb(services, qa, options)
        sampled = sample_questions(qa, questions, seed)
        await warm_up(services)
        chat_model = model or services.settings.chat_model
        rows = [Row("pipeline"), Row("agent")]
        if not services.chat(chat_model).supports_tools:
            rows[1].skipped = LOCAL_TOOLS_REFUSAL.format(model=chat_model).split(";")[0]
        graphs = {"pipeline": build_graph("ragline", checkpointer=memory_saver()), "agent": build_agent_graph(checkpointer=memory_saver())}
        for i, question in enumerate(sampled, start=1):
            request = build_request(question, kb, options)
            if model:
                request = request.model_copy(update={"chat_model": model})
            if max_tokens:  # validated, unlike model_copy's update: a misspelt field fails here
                request = request.model_copy(update={"summary": SummaryConfig(**{**request.summary.model_dump(), "max_tokens": max_tokens})})
            for row in rows:
                if not row.skipped:
                    tools = AGENT_TOOLS if row.mode == "agent" else ()
                    row.asked.append((question, await ask(graphs[row.mode], services, request, options.tenant, tools)))
            print(f"\r{i}/{len(sampled)} questions", end="", flush=True)
        print(f"\n{qa.name}: {len(sampled)} questions (seed {seed}), model {chat_model}")
        print(table(rows))
    finally:
        await services.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data" / "eval" / "musique_100")
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", help="the chat model of both modes (a litellm model with tool calling, for agent mode)")
    parser.add_argument("--max-tokens", type=int, help="cap each answer (default: the model's own limit)")
    args = parse_args(parser, questions=1, max_tokens=24)
    data = smoke_set(args.data, questions=args.questions, others=3) if args.smoke else args.data
    asyncio.run(main(data, args.questions, args.seed, args.model, args.max_tokens))
