"""Retrieval quality on every BEIR set under the eval folder: vector, keyword, hybrid and fusion variants.

Runs the real path (ingestion into a scratch KB, Chroma, bm25s, HybridSearcher) with the embedded
default model; embeddings come from the shared cache after the first run. "hybrid, configured" is
HybridSearcher itself (fusion + pseudo-relevance feedback). The vector-only and keyword-only lists
are fetched once per query at the full pool depth (500) and the RRF rows fuse them offline with
ragline.retrieval.fusion (without feedback), exactly as one HybridSearcher round does.
--grid adds the RRF k x weight grid, z-score weights, and feedback hits x beta through the real path.

    python benchmarks/retrieval_quality.py [EVAL_DIR] [--sets cranfield,xquad_en] [--grid]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

from harness import parse_args, smoke_set

from ragline.contracts.passages import MatchType
from ragline.evaluation.retrieval import WHOLE_DOCUMENT, doc_text, doc_title, load_beir
from ragline.ingestion.service import IngestionService, TextDocument
from ragline.models.embeddings import Embedder
from ragline.retrieval.config import RetrievalConfig
from ragline.retrieval.fusion import Hit, fuse
from ragline.retrieval.hybrid import fusion_args
from ragline.retrieval.metrics import METRICS, score_run
from ragline.retrieval.stack import RetrievalStack
from ragline.retrieval.types import ChunkingConfig, SearchParams
from ragline.services import Services

QUERY_LIMITS = {"cmrc2018_dev": 800}  # the baselines use the first 800 CMRC questions
DEFAULT_EVAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "eval"
GRID_K = (10, 20, 40, 60)
GRID_VECTOR_WEIGHT = (0.3, 0.4, 0.5, 0.6, 0.7)
GRID_FEEDBACK_DOCS = (0, 3, 5)
GRID_FEEDBACK_WEIGHT = (0.25, 0.5, 1.0)


async def side_lists(data_dir: Path, embedder: Embedder, settings: RetrievalConfig, max_queries: int | None,
                     variants: dict[str, RetrievalConfig]):
    """Per query: the vector-only and keyword-only hit lists (pool depth) as fusion inputs, and the
    HybridSearcher run (depth 100) under each of `variants` (name -> settings)."""
    beir = load_beir(data_dir, max_queries)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        stack = RetrievalStack.build(root, embedder, settings.model_copy(update={"data_dir": root}))
        kb = stack.knowledge_bases.create("bench", chunking=ChunkingConfig(chunk_size=WHOLE_DOCUMENT, chunk_overlap=0))
        # a corpus entry with no text (Cranfield's 471) cannot be a document: ingestion refuses it
        docs = [TextDocument(doc_text(d), doc_title(d), f"beir:{d['_id']}") for d in beir.corpus if doc_text(d).strip()]
        knowledge = await IngestionService(stack).ingest_documents(kb.id, docs)
        doc_of_knowledge = {k.id: k.source.removeprefix("beir:") for k in knowledge}
        lists: dict[str, list[list[Hit]]] = {}
        hybrid: dict[str, dict[str, list[str]]] = {name: {} for name in variants}
        for query in beir.queries:
            vector = await embedder.embed_query(query["text"])
            sides = []
            for mode in ("vector", "keyword"):
                params = SearchParams(query=query["text"], knowledge_base_ids=[kb.id], match_count=500,
                                      disable_recall_thresholds=True, query_embedding=vector,
                                      disable_vector=mode == "keyword", disable_keyword=mode == "vector")
                results = await stack.searcher.search(params)
                match = MatchType.VECTOR if mode == "vector" else MatchType.KEYWORD
                sides.append([Hit(doc_of_knowledge[r.knowledge_id], kb.id, r.score, match) for r in results])
            lists[query["_id"]] = sides
            params = SearchParams(query=query["text"], knowledge_base_ids=[kb.id], match_count=100,
                                  disable_recall_thresholds=True, query_embedding=vector)
            for name, variant in variants.items():
                stack.searcher.settings = variant
                hybrid[name][query["_id"]] = [doc_of_knowledge[r.knowledge_id] for r in await stack.searcher.search(params)]
    return beir, lists, hybrid


def fused_run(lists, k: int, vector_weight: float, keyword_weight: float, depth: int = 100,
              method: str = "rrf", vector_std_floor: float = 0.0) -> dict[str, list[str]]:
    return {q: [f.chunk_id for f in fuse([v], [kw], k, vector_weight, keyword_weight, method, vector_std_floor)][:depth]
            for q, (v, kw) in lists.items()}


def row(name: str, metrics: dict[str, float]) -> str:
    return f"{name:<26}" + "".join(f"{metrics[m]:>11.4f}" for m in METRICS)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("eval_dir", nargs="?", default=str(DEFAULT_EVAL))
    parser.add_argument("--sets", default="", help="comma-separated folder names (default: all)")
    parser.add_argument("--grid", action="store_true", help="also print the RRF k x weight grid (nDCG@10)")
    args = parse_args(parser, sets="cranfield,xquad_en")
    services = Services.from_settings()
    settings = RetrievalConfig.from_settings(services.settings)
    embedder = services.embedder
    root = Path(args.eval_dir)
    names = [n for n in args.sets.split(",") if n] or sorted(p.name for p in root.iterdir() if (p / "qrels.tsv").is_file())
    print(f"configured fusion: {fusion_args(settings)}; bm25 k1={settings.bm25_k1} b={settings.bm25_b}; "
          f"feedback {settings.feedback_docs} hits, beta {settings.feedback_weight}")
    variants = {"configured": settings}
    if args.grid:
        variants |= {f"feedback {n} x {beta}": settings.model_copy(update={"feedback_docs": n, "feedback_weight": beta})
                     for n in GRID_FEEDBACK_DOCS for beta in GRID_FEEDBACK_WEIGHT}
    for name in names:
        data = smoke_set(root / name) if args.smoke else root / name  # --smoke: three questions of each set
        beir, lists, runs = await side_lists(data, embedder, settings, QUERY_LIMITS.get(name), variants)
        vector = score_run({q: [h.chunk_id for h in v][:100] for q, (v, _) in lists.items()}, beir.qrels)
        keyword = score_run({q: [h.chunk_id for h in kw][:100] for q, (_, kw) in lists.items()}, beir.qrels)
        hybrid = score_run(runs["configured"], beir.qrels)
        seed = score_run(fused_run(lists, 60, 0.7, 0.3), beir.qrels)
        print(f"\n{name}: {len(beir.corpus)} documents, {len(beir.queries)} queries")
        print(f"{'retriever':<26}" + "".join(f"{m:>11}" for m in METRICS))
        print(row("vector (e5-small)", vector))
        print(row("keyword (bm25s)", keyword))
        print(row("hybrid, seed RRF 60/.7/.3", seed))
        print(row("hybrid, RRF k=10 .5/.5", score_run(fused_run(lists, 10, 0.5, 0.5), beir.qrels)))
        print(row("hybrid, no feedback", score_run(fused_run(lists, **fusion_args(settings)), beir.qrels)))
        print(row("hybrid (HybridSearcher)", hybrid))
        if args.grid:
            print("nDCG@10 by RRF k (rows) and vector weight (columns; keyword = 1 - vector):")
            print(f"{'k':>4}" + "".join(f"{w:>9}" for w in GRID_VECTOR_WEIGHT))
            for k in GRID_K:
                cells = [score_run(fused_run(lists, k, w, round(1 - w, 2)), beir.qrels)["nDCG@10"] for w in GRID_VECTOR_WEIGHT]
                print(f"{k:>4}" + "".join(f"{c:>9.4f}" for c in cells))
            cells = [score_run(fused_run(lists, 0, w, round(1 - w, 2), method="zscore"), beir.qrels)["nDCG@10"]
                     for w in GRID_VECTOR_WEIGHT]
            print(f"{'z':>4}" + "".join(f"{c:>9.4f}" for c in cells) + "   (z-score, no feedback)")
            print("nDCG@10 of HybridSearcher by feedback hits (rows) and beta (columns):")
            print(f"{'n':>4}" + "".join(f"{b:>9}" for b in GRID_FEEDBACK_WEIGHT))
            for n in GRID_FEEDBACK_DOCS:
                cells = [score_run(runs[f"feedback {n} x {b}"], beir.qrels)["nDCG@10"] for b in GRID_FEEDBACK_WEIGHT]
                print(f"{n:>4}" + "".join(f"{c:>9.4f}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
