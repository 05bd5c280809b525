"""`ragline eval --answers DATA_DIR`: the whole graph answering sampled questions, scored.

Writes the JSON report (settings, metrics, one row per question), prints a short table, and with
`--baseline old.json` prints per-metric deltas and exits with GATE_FAILED when a quality metric
dropped by more than the tolerance. Progress goes to stderr; errors are one line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ragline.retrieval.errors import RetrievalError
from ragline.services import Services

DEFAULT_QUESTIONS = 20  # about a minute with the local 1.5B model on 2 cores (2-4 s per question)
DEFAULT_TOLERANCE = 0.01  # a drop of one question in a hundred is noise, not a regression
GATE_FAILED = 3  # distinct from 1 (the run failed) so CI can tell a regression from a crash


def default_output(dataset: str) -> Path:
    """In the working directory: evaluation sets may sit on read-only or shared storage."""
    return Path.cwd() / f"answers-eval-{dataset}.json"


def _gate(report: dict[str, Any], baseline: dict[str, Any], tolerance: float) -> int:
    from ragline.evaluation.report import compare, delta_table, settings_differences

    for difference in settings_differences(report["settings"], baseline.get("settings") or {}):
        print(f"note: baseline differs in {difference}", file=sys.stderr)
    deltas = compare(report["metrics"], baseline["metrics"], tolerance)
    print(f"\nagainst the baseline (tolerance {tolerance}):")
    print(delta_table(deltas))
    regressed = [d for d in deltas if d.regressed]
    if regressed:
        names = ", ".join(f"{d.metric} {d.change:+.4f}" for d in regressed)
        print(f"error: quality dropped beyond {tolerance}: {names}", file=sys.stderr)
        return GATE_FAILED
    return 0


async def evaluate_answers(args: argparse.Namespace, services: Services, bar: Any) -> int:
    """The command body; `bar` (kb.ProgressBar) draws progress on stderr and is closed before any output."""
    from ragline.evaluation.answers import AnswerEvalOptions
    from ragline.evaluation.answers import evaluate_answers as run
    from ragline.evaluation.report import load_report, metric_table

    data_dir = Path(args.data_dir)
    limit = args.max_queries or DEFAULT_QUESTIONS
    if limit < 1:
        raise RetrievalError("--limit must be at least 1")
    baseline = load_report(Path(args.baseline)) if args.baseline else None  # a bad baseline fails before the long run
    options = AnswerEvalOptions(limit=limit, seed=args.seed, short_answers=args.short_answers,
                                abstention=args.abstention, chunk_size=args.chunk_size)
    try:
        report = await run(data_dir, services, options, progress=lambda stage, done, total: bar.update(done, total, stage))
    finally:
        bar.close()
    output = Path(args.output) if args.output else default_output(report["settings"]["dataset"])
    output.write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    settings, metrics = report["settings"], report["metrics"]
    print(f"{settings['dataset']}: {settings['questions']} questions (seed {settings['seed']}), model {settings['model']}, "
          f"{settings['prompt_mode']} prompt" + (", abstention pass" if options.abstention else ""))
    print(metric_table(metrics))
    print(f"report: {output}")
    if metrics["error_rate"] == 1.0:
        first = next(row["error"] for row in report["questions"] if row["error"])
        raise RetrievalError(f"every question failed; the first: {first}")
    return _gate(report, baseline, args.tolerance) if baseline is not None else 0
