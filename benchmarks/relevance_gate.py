"""The relevance gate (retrieval/relevance.py) on real questions: what it keeps, what it stops.

    python benchmarks/relevance_gate.py [--data ../shared/data/eval/xquad_en] [--questions 150] [--pool 10]

For sampled questions of a BEIR-layout set (one passage per paragraph, embedded with the default
embedder), the pool is the top `--pool` paragraphs by similarity, as the search returns them.
"gold kept": a gold paragraph passes the gate (some hit reaches the threshold, and the gold one
a share of it); "support kept": the share of all of a question's gold paragraphs that pass (a
multi-hop question has two to four); "refused": the gate stops a question whose gold paragraph
was in the pool. "abstains": with the gold paragraphs removed from the knowledge base, no
remaining paragraph passes, so the question gets the fallback.
Prints one row per threshold; the default is marked.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
from pathlib import Path
from typing import Any

import numpy as np

from ragline import defaults
from ragline.retrieval.relevance import relevance_scores
from ragline.retrieval.types import SearchResult

THRESHOLDS = (0.40, 0.45, 0.50, 0.55, 0.60, 0.65, 0.70)


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _pool(order: list[int], texts: list[str], similarities: np.ndarray) -> list[SearchResult]:
    return [SearchResult(id=str(j), content=texts[j], score=float(similarities[j]), knowledge_id=str(j),
                         knowledge_base_id="kb", vector_score=float(similarities[j])) for j in order]


async def _cached_passages(embedder: Any, texts: list[str]) -> np.ndarray:
    """The corpus's vectors, kept under ~/.cache/ragline/bench by a hash of texts and model: embedding
    a corpus of 1,890 paragraphs costs minutes on 2 cores, the gate's arithmetic a second."""
    key = hashlib.sha256(("\x00".join([type(embedder).__name__, str(getattr(embedder, "model", "")), *texts])).encode()).hexdigest()[:24]
    path = Path.home() / ".cache/ragline/bench" / f"passages-{key}.npy"
    if path.is_file():
        return np.load(path)
    vectors = np.asarray(await embedder.embed_passages(texts))
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


async def main(data: Path, questions: int, pool: int, seed: int) -> None:
    from ragline.services import Services

    embedder = Services.from_settings().embedder
    corpus = _read(data / "corpus.jsonl")
    queries = {q["_id"]: q["text"] for q in _read(data / "queries.jsonl")}
    gold: dict[str, set[str]] = {}
    for line in (data / "qrels.tsv").read_text().splitlines()[1:]:
        query_id, doc_id = line.split("\t")[:2]
        gold.setdefault(query_id, set()).add(doc_id)
    ids = [doc["_id"] for doc in corpus]
    position = {doc_id: j for j, doc_id in enumerate(ids)}
    texts = [f"{doc.get('title', '')}\n{doc['text']}".strip() for doc in corpus]
    sample = random.Random(seed).sample(sorted(q for q in gold if q in queries), min(questions, len(gold)))
    passages = await _cached_passages(embedder, texts)
    asked = np.asarray(await embedder.embed_queries([queries[q] for q in sample]))
    passages /= np.linalg.norm(passages, axis=1, keepdims=True)
    asked /= np.linalg.norm(asked, axis=1, keepdims=True)
    # per question: (best score, scores of the gold paragraphs in the pool, golds in all), and the best without golds
    kept_scores: list[tuple[float, list[float], int]] = []
    abstain_scores: list[float] = []
    for row, question in zip(asked @ passages.T, sample, strict=True):
        targets = {position[d] for d in gold[question] if d in position}
        ranked = [int(j) for j in np.argsort(-row)]
        with_gold = ranked[:pool]
        scores = relevance_scores(queries[question], _pool(with_gold, texts, row)) or [1.0] * pool
        kept_scores.append((max(scores), [s for j, s in zip(with_gold, scores, strict=True) if j in targets], len(targets)))
        without = [j for j in ranked if j not in targets][:pool]
        abstain_scores.append(max(relevance_scores(queries[question], _pool(without, texts, row)) or [1.0]))
    best = np.asarray([k[0] for k in kept_scores])
    found = np.asarray([bool(k[1]) for k in kept_scores])  # some gold paragraph is in the pool at all
    best_wrong = np.asarray(abstain_scores)
    print(f"{data.name}: {len(sample)} questions (seed {seed}), pool of {pool} hits; a gold paragraph in the pool for {np.mean(found):.0%}")
    print("gold kept: the gate passes and a gold paragraph in the pool stays; support kept: share of all gold paragraphs that stay;")
    print("refused: of the questions with a gold paragraph in the pool, the share the gate refuses (a false 'not found')")
    print(f"{'threshold':>10} {'gold kept':>10} {'support kept':>13} {'refused':>8} {'abstains':>10}")
    for threshold in THRESHOLDS:
        mark = "  <- default" if abs(threshold - defaults.RELEVANCE_MIN_SCORE) < 1e-9 else ""
        floor = threshold * defaults.RELEVANCE_KEEP_SHARE
        passes = best >= threshold
        kept = np.asarray([p and any(s >= floor for s in k[1]) for p, k in zip(passes, kept_scores, strict=True)])
        support = np.mean([sum(s >= floor for s in k[1]) / k[2] if p and k[2] else 0.0 for p, k in zip(passes, kept_scores, strict=True)])
        refused = np.mean(~passes[found]) if found.any() else 0.0
        print(f"{threshold:10.2f} {np.mean(kept):10.2f} {support:13.2f} {refused:8.2f} {np.mean(best_wrong < threshold):10.2f}{mark}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/eval/xquad_en")
    parser.add_argument("--questions", type=int, default=150)
    parser.add_argument("--pool", type=int, default=10)
    parser.add_argument("--seed", type=int, default=11)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.data, arguments.questions, arguments.pool, arguments.seed))
