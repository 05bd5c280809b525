"""The numbers of an answer evaluation: aggregates of its rows, the table, and the baseline gate.

Every aggregate is recomputed from the per-question rows (see evaluation/scoring.py for what
each one means), so a report can be checked by reading its rows. Means run over all sampled
questions: a fallback or an error scores 0, it is not left out. Citation precision is pooled
over every cited passage of the run (micro average); latencies cover the turns that did not fail.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Row = dict[str, Any]

# Metrics the baseline gate guards, with the direction that is better.
HIGHER_IS_BETTER = ("exact_match", "f1", "contains_gold", "citation_precision", "citation_coverage", "gold_retrieved", "support_recall", "abstention_rate")
LOWER_IS_BETTER = ("fallback_rate", "error_rate", "wrong_with_source")
SHOWN = (
    "exact_match", "f1", "contains_gold", "gold_retrieved", "support_recall", "citation_precision", "citation_coverage",
    "wrong_with_source", "citations_model", "citations_attributed", "fallback_rate", "error_rate", "abstention_rate",
    "abstention_contains_gold", "first_token_p50_s", "first_token_p95_s", "complete_p50_s", "complete_p95_s",
)
MEANINGS = {  # one line each, printed beside the value: a number nobody can read helps nobody
    "exact_match": "share of answers equal to a gold answer after normalising (full sentences score 0: try --short-answers)",
    "f1": "word overlap with the best gold answer (0-1), partial credit for longer answers",
    "contains_gold": "share of answers that contain a gold answer anywhere",
    "gold_retrieved": "share of questions whose gold paragraph reached the model's context",
    "support_recall": "multi-hop: share of all gold paragraphs of a question that reached the context",
    "citation_precision": "share of cited passages that contain a gold answer",
    "citation_coverage": "share of (non-fallback) answers that cite at least one source",
    "wrong_with_source": "share of answers without the gold that still show a source: the worst outcome",
    "citations_model": "citations the model wrote itself",
    "citations_attributed": "citations Ragline matched to sentences the model left uncited",
    "fallback_rate": 'share of questions answered "not found" (the fallback)',
    "error_rate": "share of questions whose turn failed",
    "abstention_rate": "--abstention: share answered \"not found\" once the gold paragraph was removed (higher is better)",
    "abstention_contains_gold": "--abstention: share still containing the gold without its paragraph (the model's memory)",
    "first_token_p50_s": "median seconds to the first answer token",
    "first_token_p95_s": "95th percentile seconds to the first answer token",
    "complete_p50_s": "median seconds to the complete answer",
    "complete_p95_s": "95th percentile seconds to the complete answer",
}
SETTINGS_COMPARED = ("dataset", "corpus_sha256", "model", "questions", "seed", "prompt_mode", "chunk_size")


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _rounded(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _citation_metrics(rows: Sequence[Row]) -> dict[str, Any]:
    cited = [c for row in rows for c in row["citations"]]
    by_kind = {kind: [c for c in cited if c["attributed"] == attributed] for kind, attributed in (("model", False), ("attributed", True))}
    answered = [row for row in rows if not row["fallback"] and not row["error"]]
    return {
        "citation_precision": _rounded(mean([float(c["contains_gold"]) for c in cited])),
        "citation_precision_model": _rounded(mean([float(c["contains_gold"]) for c in by_kind["model"]])),
        "citation_precision_attributed": _rounded(mean([float(c["contains_gold"]) for c in by_kind["attributed"]])),
        "citation_coverage": _rounded(mean([float(bool(row["citations"])) for row in answered])),
        "citations_model": len(by_kind["model"]),
        "citations_attributed": len(by_kind["attributed"]),
    }


def _latency_metrics(rows: Sequence[Row]) -> dict[str, Any]:
    ok = [row for row in rows if not row["error"]]
    first = [row["first_token_s"] for row in ok if row["first_token_s"] is not None]
    complete = [row["complete_s"] for row in ok]
    return {
        "first_token_p50_s": _rounded(percentile(first, 0.5), 3),
        "first_token_p95_s": _rounded(percentile(first, 0.95), 3),
        "complete_p50_s": _rounded(percentile(complete, 0.5), 3),
        "complete_p95_s": _rounded(percentile(complete, 0.95), 3),
    }


def _wrong_with_source(row: Row) -> bool:
    """The worst outcome: an answer without the gold that still shows a source."""
    return not row["contains_gold"] and not row["fallback"] and not row["error"] and bool(row["citations"])


def aggregate(rows: Sequence[Row], abstention_rows: Sequence[Row] | None = None) -> dict[str, Any]:
    """The report's metrics from its rows (and the abstention rows, when that pass ran)."""

    def share(key: str, of: Sequence[Row] = rows) -> float | None:
        return _rounded(mean([float(bool(row[key])) for row in of]))

    metrics: dict[str, Any] = {
        "questions": len(rows),
        "exact_match": share("exact_match"),
        "f1": _rounded(mean([float(row["f1"]) for row in rows])),
        "contains_gold": share("contains_gold"),
        "gold_retrieved": share("gold_retrieved"),
        "support_recall": _rounded(mean([float(row["support_recall"]) for row in rows if row.get("support_recall") is not None])),
        **_citation_metrics(rows),
        "wrong_with_source": _rounded(mean([float(_wrong_with_source(row)) for row in rows])),
        "fallback_rate": share("fallback"),
        "error_rate": share("error"),
        "abstention_rate": None,
        "abstention_contains_gold": None,
        **_latency_metrics(rows),
    }
    if abstention_rows is not None:
        metrics["abstention_rate"] = share("fallback", abstention_rows)
        metrics["abstention_contains_gold"] = share("contains_gold", abstention_rows)
    return metrics


# --- output ---


def _value(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def metric_table(metrics: dict[str, Any]) -> str:
    lines = [f"{'metric':<26}{'value':>10}  what it measures"]
    lines += [f"{name:<26}{_value(metrics.get(name)):>10}  {MEANINGS[name]}" for name in SHOWN]
    return "\n".join(lines)


def load_report(path: Path) -> dict[str, Any]:
    """A report written earlier; a file that is not one is a one-line error."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not JSON: {exc}") from None
    if not isinstance(report, dict) or not isinstance(report.get("metrics"), dict):
        raise ValueError(f"{path} is not an answer evaluation report (it has no metrics)")
    return report


@dataclass(frozen=True)
class Delta:
    metric: str
    current: float | int
    baseline: float | int
    regressed: bool  # a guarded metric moved the wrong way by more than the tolerance

    @property
    def change(self) -> float | int:
        return self.current - self.baseline


def compare(current: dict[str, Any], baseline: dict[str, Any], tolerance: float) -> list[Delta]:
    """Per-metric deltas of every metric both reports have a number for."""
    deltas = []
    for name in SHOWN:
        now, before = current.get(name), baseline.get(name)
        if not isinstance(now, int | float) or not isinstance(before, int | float):
            continue
        worse = before - now if name in HIGHER_IS_BETTER else now - before if name in LOWER_IS_BETTER else 0.0
        deltas.append(Delta(name, now, before, worse > tolerance + 1e-9))
    return deltas


def delta_table(deltas: Sequence[Delta]) -> str:
    lines = [f"{'metric':<26}{'value':>10}{'baseline':>10}{'delta':>10}"]
    for d in deltas:
        flag = "  REGRESSED" if d.regressed else ""
        change = f"{d.change:+.4f}" if isinstance(d.change, float) else f"{d.change:+d}"
        lines.append(f"{d.metric:<26}{_value(d.current):>10}{_value(d.baseline):>10}{change:>10}{flag}")
    return "\n".join(lines)


def settings_differences(current: dict[str, Any], baseline: dict[str, Any]) -> list[str]:
    """Settings that make the two runs not directly comparable (a warning, not a failure)."""
    return [f"{key}: {baseline.get(key)!r} -> {current.get(key)!r}" for key in SETTINGS_COMPARED
            if key in baseline and baseline.get(key) != current.get(key)]
