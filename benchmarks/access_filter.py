"""What document access rules cost a search: hybrid search latency (p50/p95) over 10,000 documents
when most of them are restricted to one of 50 groups and the reader may read only a few, beside the
same search on the same corpus with nothing restricted. The goal (the document-access issue):
filtered / unfiltered under 1.2x at p50 and p95.

Two knowledge bases hold the same documents with the same vectors: "open", where no document is
restricted, and "grouped", where about 80% of the documents are restricted to one of `--groups`
groups (drawn at random) and the rest are open. The rows, each over the same queries:

  unfiltered        the service's own reader (Principal.operator_of) on the open base: nothing hidden
  operator          the same reader on the grouped base: every restricted rule is read and passed, none hidden
  user, 1 group     a user in one group on the grouped base: the other groups' documents are hidden
  user, 2 groups    a user in two groups
  no group          a user in no group: every restricted document is hidden

A search reads its bases' restricted documents from the catalog on every question
(HybridSearcher.readable) and passes the ids the reader may not read as `hidden` to Chroma (their
chunks, dropped from a deeper unfiltered query; a `$nin` filter when too few rows remain) and to
bm25s (a mask kept per reader), before ranking; "hidden ids" is how many it passes down, and "step 1"
is that catalog read alone (base lookup, restricted rules, the reader's decision), timed on its own.
"fewest results" is the fewest a query got (10 when filtering leaves enough readable documents), and
"leaked" counts results of documents the reader may not read: anything but 0 ends the script with 1.

Documents are synthetic, as in retrieval_latency.py: random sentences of the Cranfield abstracts,
about 400 characters each (one chunk). Vectors are deterministic random unit vectors of 384
dimensions derived from each text (no model call: embedding 10,000 passages with the local model
would take far longer than the search does); they enter through the real ingestion path
(IngestionService, SQLite catalog, Chroma, bm25s). Queries are the Cranfield questions with random
query vectors passed in as `query_embedding`, so only the search itself is timed: match count 10,
hybrid with pseudo-relevance feedback, recall thresholds off so that every stage runs. The rows take
turns query by query (the order rotating), so that a change in the machine's load falls on all of
them alike. The data directory is a temporary folder, removed at the end.

    python benchmarks/access_filter.py [--docs 10000] [--groups 50] [--queries 100] [--restricted 0.8]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from harness import ROOT, SMOKE_EVAL, parse_args, percentile
from retrieval_latency import questions, sentences  # the Cranfield sentences and questions it searches too

from ragline.contracts.access import AccessRule, Principal
from ragline.ingestion.service import IngestionService, TextDocument
from ragline.models.embeddings import Embedder
from ragline.retrieval.config import RetrievalConfig
from ragline.retrieval.stack import RetrievalStack
from ragline.retrieval.types import SearchParams

EVAL = ROOT.parent / "shared" / "data" / "eval" / "cranfield"
DIM = 384
BATCH = 2500  # documents per ingestion call
GOAL = 1.2
TENANT = "default"


class HashedVectors(Embedder):
    """The real Embedder (batching, roles) with the model call replaced by a unit vector drawn from
    each text's hash: the same text has the same vector in both bases, whatever the batching."""

    def __init__(self) -> None:
        super().__init__(model="benchmark/hashed-384", batch_size=512, cache=None)

    async def _call(self, texts: list[str], role: str) -> list[list[float]]:
        seeds = [int.from_bytes(hashlib.blake2b(f"{role}\n{t}".encode(), digest_size=8).digest(), "little") for t in texts]
        vectors = np.stack([np.random.default_rng(s).standard_normal(DIM) for s in seeds]).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors.tolist()


def group_name(n: int) -> str:
    return f"group-{n:02d}"


@dataclass
class Corpus:
    texts: list[str]
    groups: list[int | None]  # each document's group; None: open

    def documents(self, start: int, stop: int, restricted: bool) -> list[TextDocument]:
        docs = []
        for i in range(start, stop):
            group = self.groups[i] if restricted else None
            docs.append(TextDocument(self.texts[i], f"doc {i}", f"synthetic:{i}",
                                     access=AccessRule(groups=[group_name(group)]) if group is not None else AccessRule()))
        return docs


def make_corpus(count: int, groups: int, share: float, pool: list[str], rng: np.random.Generator) -> Corpus:
    """`count` documents of random sentences (at most 450 characters: one chunk each); a `share` of
    them restricted to one of `groups` groups drawn at random, the others open."""
    texts, assigned = [], []
    for _ in range(count):
        text = ""
        while len(text) < 350:
            text += pool[int(rng.integers(len(pool)))] + " "
        texts.append(text[:450].strip())
        assigned.append(int(rng.integers(groups)) if rng.random() < share else None)
    return Corpus(texts, assigned)


async def ingest(stack: RetrievalStack, kb_id: str, corpus: Corpus, restricted: bool) -> float:
    service = IngestionService(stack)
    began = time.perf_counter()
    for start in range(0, len(corpus.texts), BATCH):
        stop = min(start + BATCH, len(corpus.texts))
        await service.ingest_documents(kb_id, corpus.documents(start, stop, restricted))
        print(f"\r  {'grouped' if restricted else 'open'}: ingested {stop}/{len(corpus.texts)}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return time.perf_counter() - began


@dataclass
class Row:
    label: str
    base: str
    kb_id: str
    reader: Principal
    hidden: int = 0  # ids the search passes down as `hidden` (the last query's)
    fewest: int | None = None  # the fewest results of a query: a filtered search still fills its 10
    leaked: int = 0  # results of a document the reader may not read: must stay 0
    search_ms: list[float] = field(default_factory=list)
    step1_ms: list[float] = field(default_factory=list)

    def params(self, text: str, vector: list[float]) -> SearchParams:
        return SearchParams(query=text, knowledge_base_ids=[self.kb_id], match_count=10, reader=self.reader,
                            disable_recall_thresholds=True, query_embedding=vector)


async def time_rows(stack: RetrievalStack, rows: list[Row], texts: list[str], vectors: np.ndarray, warmup: int) -> None:
    """Every row answers every query; the rows take turns, starting one further on each query."""
    searcher = stack.searcher
    for n, (text, vector) in enumerate(zip(texts, vectors.tolist())):
        for k in range(len(rows)):
            row = rows[(n + k) % len(rows)]
            began = time.perf_counter()
            results = await searcher.search(row.params(text, vector))
            search_ms = (time.perf_counter() - began) * 1000
            began = time.perf_counter()
            _, hidden = searcher.readable([row.kb_id], row.reader)
            step1_ms = (time.perf_counter() - began) * 1000
            if n >= warmup:
                row.search_ms.append(search_ms)
                row.step1_ms.append(step1_ms)
            row.hidden = len(hidden.documents)
            row.fewest = len(results) if row.fewest is None else min(row.fewest, len(results))
            row.leaked += sum(r.knowledge_id in hidden.documents for r in results)
        if (n + 1) % 20 == 0:
            print(f"\r  queries {n + 1}/{len(texts)}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)


def print_table(rows: list[Row], args: argparse.Namespace, restricted: int, ingest_s: float) -> None:
    base = rows[0]
    p50, p95 = percentile(base.search_ms, 50), percentile(base.search_ms, 95)
    print(f"\nHybrid search latency in ms, {args.docs} documents (one chunk each), {restricted} restricted to one of "
          f"{args.groups} groups, {len(base.search_ms)} queries (+{args.warmup} warm-up), match count 10, "
          f"query embedding excluded; ratios against the unfiltered row; goal: filtered under {GOAL}x")
    print(f"| {'row':<16} | {'base':<7} | {'hidden ids':>10} | {'p50 ms':>7} | {'p95 ms':>7} | {'p50 x':>6} | {'p95 x':>6} "
          f"| {'step 1 p50 ms':>13} | {'fewest results':>14} | {'leaked':>6} |")
    print(f"|{'-' * 18}|{'-' * 9}|{'-' * 12}|{'-' * 9}|{'-' * 9}|{'-' * 8}|{'-' * 8}|{'-' * 15}|{'-' * 16}|{'-' * 8}|")
    for row in rows:
        r50, r95 = percentile(row.search_ms, 50), percentile(row.search_ms, 95)
        print(f"| {row.label:<16} | {row.base:<7} | {row.hidden:>10} | {r50:>7.2f} | {r95:>7.2f} | {r50 / p50:>5.2f}x | "
              f"{r95 / p95:>5.2f}x | {percentile(row.step1_ms, 50):>13.2f} | {row.fewest:>14} | {row.leaked:>6} |")
    filtered = [r for r in rows if r.hidden]
    worst50 = max((percentile(r.search_ms, 50) / p50 for r in filtered), default=float("nan"))
    worst95 = max((percentile(r.search_ms, 95) / p95 for r in filtered), default=float("nan"))
    verdict = "meets" if worst50 < GOAL and worst95 < GOAL else "misses"
    print(f"worst filtered / unfiltered: p50 {worst50:.2f}x, p95 {worst95:.2f}x ({verdict} the {GOAL}x goal)")
    print(f"step 1: the catalog read that computes the hidden ids, timed alone (it is part of every search's figure); "
          f"ingestion of both bases: {ingest_s:.1f} s")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=10_000, help="documents in each base (one chunk each)")
    parser.add_argument("--groups", type=int, default=50, help="groups the restricted documents are spread over")
    parser.add_argument("--restricted", type=float, default=0.8, help="share of the documents restricted to a group")
    parser.add_argument("--queries", type=int, default=100, help="timed queries per row")
    parser.add_argument("--warmup", type=int, default=10, help="untimed queries per row first (bm25s index built, caches warm)")
    parser.add_argument("--data", type=Path, default=EVAL, help="the Cranfield set: sentences of its abstracts, its questions")
    args = parse_args(parser, docs=300, queries=6, warmup=2)
    data = args.data if (args.data / "corpus.jsonl").is_file() else SMOKE_EVAL
    if data != args.data:
        print(f"{args.data} is not here: sentences and questions come from {data}", file=sys.stderr)
    pool, asked = sentences(data), questions(data)
    rng = np.random.default_rng(20240)
    corpus = make_corpus(args.docs, args.groups, args.restricted, pool, rng)
    total = args.warmup + args.queries
    texts = [asked[i % len(asked)] for i in range(total)]
    vectors = rng.standard_normal((total, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    with tempfile.TemporaryDirectory(prefix="ragline-access-filter-") as tmp:
        stack = RetrievalStack.build(Path(tmp), HashedVectors(), RetrievalConfig(redis_url=None, chroma_url=None))
        open_kb = stack.knowledge_bases.create("open", tenant_id=TENANT)
        grouped_kb = stack.knowledge_bases.create("grouped", tenant_id=TENANT)
        ingest_s = await ingest(stack, open_kb.id, corpus, restricted=False)
        ingest_s += await ingest(stack, grouped_kb.id, corpus, restricted=True)
        operator = Principal.operator_of(TENANT)
        rows = [
            Row("unfiltered", "open", open_kb.id, operator),
            Row("operator", "grouped", grouped_kb.id, operator),
            Row("user, 1 group", "grouped", grouped_kb.id, Principal(TENANT, "alice", frozenset({group_name(0)}))),
            Row("user, 2 groups", "grouped", grouped_kb.id, Principal(TENANT, "bob", frozenset({group_name(1), group_name(2)}))),
            Row("no group", "grouped", grouped_kb.id, Principal(TENANT, "carol")),
        ]
        await time_rows(stack, rows, texts, vectors, args.warmup)
    restricted = sum(g is not None for g in corpus.groups)
    print_table(rows, args, restricted, ingest_s)
    expected = {row.label: restricted - sum(group_name(g) in row.reader.groups for g in corpus.groups if g is not None)
                for row in rows if not row.reader.operator}
    wrong = [f"{row.label}: {row.hidden} hidden ids, expected {expected[row.label]}"
             for row in rows if row.label in expected and row.hidden != expected[row.label]]
    wrong += [f"{row.label}: {row.hidden} hidden ids, expected none" for row in rows if row.reader.operator and row.hidden]
    wrong += [f"{row.label}: {row.leaked} results of hidden documents" for row in rows if row.leaked]
    for problem in wrong:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
