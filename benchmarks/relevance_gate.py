"""The relevance gate (retrieval/relevance.py) on real questions: what it keeps, what it stops.

    python benchmarks/relevance_gate.py [--data ../shared/data/eval/xquad_en] [--questions 150] [--seed 0]

The pool of each question is what the gate sees in a turn: the hits of `chunk_search` (hybrid
search, thresholds and query expansion as configured, the gate itself off) over the knowledge
base `ragline eval --answers` builds for the set (one chunk per paragraph, cached and shared with
it). Questions are sampled as `ragline eval --answers --seed` samples them.
"gold kept": the gate passes and a gold paragraph in the pool stays; "support kept": the share of
all of a question's gold paragraphs that stay (a multi-hop question has two to four); "refused":
of the questions with a gold paragraph in the pool, the share the gate refuses (a false "not
found"). "abstains": the same pool without its gold paragraphs, judged again: the share that no
hit passes (an approximation of removing them from the base, where the search would bring the
next hits in; `ragline eval --answers --abstention` does that, with the model).
Prints one row per threshold; the default is marked.

The figures each rule of the gate was chosen on (pools of 150 XQuAD, 150 CMRC and the 100 MuSiQue
questions, threshold 0.60), before and after the joint share of the three best hits and the accent
folding:

                             before      after
    XQuAD gold kept          95%         95%
    XQuAD abstains           78%         75%
    CMRC gold kept           88%         89%
    CMRC abstains            89%         84%
    MuSiQue refused          29%         9%
    MuSiQue support kept     41%         51%

A joint weight of 1.0 refused 6% of MuSiQue but abstained on 65% of XQuAD; four hits at 0.8, 7%
and 73%; the folding alone, 27% and 78%. The stem variants (and "up" as a question word) changed
no rate on XQuAD or MuSiQue by more than a point (support kept 51% to 52%, MuSiQue abstains 46% to
45%). The named entry: MuSiQue refused 9% to 4%, support kept 52% to 56%, abstains 45% to 44%;
XQuAD and CMRC unchanged (their articles give several hits one title, and then the terms decide).
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from harness import parse_args, smoke_set

from ragline import defaults
from ragline.contracts.access import Principal
from ragline.contracts.passages import SearchResult
from ragline.retrieval.relevance import relevance_scores

THRESHOLDS = (0.45, 0.50, 0.55, 0.60, 0.65, 0.70)


async def pools(data: Path, questions: int, seed: int) -> list[tuple[str, list[SearchResult], list[str], set[str]]]:
    """(question, hits, the BEIR id of each hit, gold ids) per sampled question."""
    from ragline.contracts.passages import SearchTarget
    from ragline.evaluation.answers import AnswerEvalOptions, ensure_kb, load_qa_set, sample_questions
    from ragline.retrieval.targets import TargetSearch, search_targets
    from ragline.services import Services

    services = Services.from_settings()
    qa = load_qa_set(data)
    options = AnswerEvalOptions(limit=questions, seed=seed)
    kb, beir_id_of = await ensure_kb(services, qa, options)
    rows = []
    for question in sample_questions(qa, questions, seed):
        targets = [SearchTarget(knowledge_base_id=kb.id)]
        hits = await search_targets(services.retrieval, question.text, Principal.operator_of(options.tenant), targets, TargetSearch(relevance_gate=False))
        rows.append((question.text, hits, [beir_id_of.get(hit.knowledge_id, "") for hit in hits], set(question.gold_docs)))
    return rows


def _best(question: str, hits: list[SearchResult]) -> tuple[float, list[float]]:
    scores = relevance_scores(question, hits)
    scores = [1.0] * len(hits) if scores is None else scores
    return max(scores, default=0.0), scores


def report(name: str, rows: list[tuple[str, list[SearchResult], list[str], set[str]]]) -> None:
    judged = []  # (best score, scores of the gold hits, golds in all, gold in the pool, best score without the golds)
    for question, hits, docs, gold in rows:
        best, scores = _best(question, hits)
        blind_best, _ = _best(question, [hit for hit, doc in zip(hits, docs, strict=True) if doc not in gold])
        gold_scores = [score for score, doc in zip(scores, docs, strict=True) if doc in gold]
        judged.append((best, gold_scores, len(gold), bool(gold_scores), blind_best))
    in_pool = sum(row[3] for row in judged)
    print(f"{name}: {len(rows)} questions, pipeline pools (median {sorted(len(r[1]) for r in rows)[len(rows) // 2]} hits); "
          f"a gold paragraph in the pool for {in_pool / len(rows):.0%}")
    print(f"{'threshold':>10} {'gold kept':>10} {'support kept':>13} {'refused':>8} {'abstains':>9}")
    for threshold in THRESHOLDS:
        floor = threshold * defaults.RELEVANCE_KEEP_SHARE
        kept = support = refused = abstains = 0.0
        for best, gold_scores, golds, found, blind_best in judged:
            passes = best >= threshold
            kept += passes and any(score >= floor for score in gold_scores)
            support += sum(score >= floor for score in gold_scores) / golds if passes and golds else 0.0
            refused += found and not passes
            abstains += blind_best < threshold
        mark = "  <- default" if abs(threshold - defaults.RELEVANCE_MIN_SCORE) < 1e-9 else ""
        n = len(judged)
        print(f"{threshold:10.2f} {kept / n:10.2f} {support / n:13.2f} {refused / max(in_pool, 1):8.2f} {abstains / n:9.2f}{mark}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/eval/xquad_en")
    parser.add_argument("--questions", type=int, default=150)
    parser.add_argument("--seed", type=int, default=0)
    arguments = parse_args(parser, questions=3)
    data = smoke_set(arguments.data, questions=arguments.questions) if arguments.smoke else arguments.data
    report(data.name, asyncio.run(pools(data, arguments.questions, arguments.seed)))
