"""The relevance gate (retrieval/relevance.py) on real questions: what it keeps, what it stops.

    python benchmarks/relevance_gate.py [--data ../shared/data/eval/xquad_en] [--questions 150] [--pool 10]

For sampled questions of a BEIR-layout set (one passage per paragraph, embedded with the default
embedder), the pool is the top `--pool` paragraphs by similarity, as the search returns them.
"gold kept": the gold paragraph passes the gate (some hit reaches the threshold, and the gold one
a share of it). "abstains": with the gold paragraph removed
from the knowledge base, no remaining paragraph passes, so the question gets the fallback.
Prints one row per threshold; the default is marked.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
from pathlib import Path

import numpy as np

from ragline import defaults
from ragline.retrieval.relevance import relevance_scores
from ragline.retrieval.types import SearchResult

THRESHOLDS = (0.30, 0.35, 0.40, 0.45, 0.50, 0.55)


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _pool(order: list[int], texts: list[str], similarities: np.ndarray) -> list[SearchResult]:
    return [SearchResult(id=str(j), content=texts[j], score=float(similarities[j]), knowledge_id=str(j),
                         knowledge_base_id="kb", vector_score=float(similarities[j])) for j in order]


async def main(data: Path, questions: int, pool: int, seed: int) -> None:
    from ragline.services import Services

    embedder = Services.from_settings().embedder
    corpus = _read(data / "corpus.jsonl")
    queries = {q["_id"]: q["text"] for q in _read(data / "queries.jsonl")}
    gold = dict(line.split("\t")[:2] for line in (data / "qrels.tsv").read_text().splitlines()[1:])
    ids = [doc["_id"] for doc in corpus]
    texts = [f"{doc.get('title', '')}\n{doc['text']}".strip() for doc in corpus]
    sample = random.Random(seed).sample(sorted(q for q in gold if q in queries), min(questions, len(gold)))
    passages = np.asarray(await embedder.embed_passages(texts))
    asked = np.asarray(await embedder.embed_queries([queries[q] for q in sample]))
    passages /= np.linalg.norm(passages, axis=1, keepdims=True)
    asked /= np.linalg.norm(asked, axis=1, keepdims=True)
    kept_scores, abstain_scores = [], []
    for row, question in zip(asked @ passages.T, sample, strict=True):
        target = ids.index(gold[question])
        ranked = [int(j) for j in np.argsort(-row)]
        with_gold = ranked[:pool]
        scores = relevance_scores(queries[question], _pool(with_gold, texts, row)) or [1.0] * pool
        gold_score = scores[with_gold.index(target)] if target in with_gold else -1.0
        kept_scores.append((gold_score, max(scores)))
        without = [j for j in ranked if j != target][:pool]
        abstain_scores.append(max(relevance_scores(queries[question], _pool(without, texts, row)) or [1.0]))
    gold_scores, best = np.asarray([k[0] for k in kept_scores]), np.asarray([k[1] for k in kept_scores])
    best_wrong = np.asarray(abstain_scores)
    print(f"{data.name}: {len(sample)} questions (seed {seed}), pool of {pool} hits")
    print(f"{'threshold':>10} {'gold kept':>10} {'abstains':>10}")
    for threshold in THRESHOLDS:
        mark = "  <- default" if abs(threshold - defaults.RELEVANCE_MIN_SCORE) < 1e-9 else ""
        kept = (best >= threshold) & (gold_scores >= threshold * defaults.RELEVANCE_KEEP_SHARE)
        print(f"{threshold:10.2f} {np.mean(kept):10.2f} {np.mean(best_wrong < threshold):10.2f}{mark}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/eval/xquad_en")
    parser.add_argument("--questions", type=int, default=150)
    parser.add_argument("--pool", type=int, default=10)
    parser.add_argument("--seed", type=int, default=11)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.data, arguments.questions, arguments.pool, arguments.seed))
