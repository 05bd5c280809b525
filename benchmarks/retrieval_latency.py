"""Query latency (p50/p95) of vector, keyword and hybrid search at 1k, 10k and 100k chunks, on the
embedded backend (Chroma folder, SQLite catalog, bm25s) and the shared one (Redis 8: catalog, HNSW
vectors and full-text keywords in the Redis Query Engine), ingestion throughput in chunks/s with
and without embedding time, and Redis memory per chunk. Prints tables.

Documents are synthetic: random sentences of the Cranfield abstracts (real English word
statistics), about 400 characters each, so every document is one chunk. Vectors are random unit
vectors of 384 dimensions (the size of multilingual-e5-small): embedding 100k passages with the
local model would take hours, and latency does not depend on what the vectors mean. They enter
through the real ingestion path (IngestionService, Chroma, catalog, bm25s); only the model call
is replaced. Queries are the Cranfield questions with random query vectors, passed in as
`query_embedding`, so query embedding is excluded from every figure. Searches run as the pipeline
runs them: match count 10 (the embedding top-k; pool 50), hybrid with pseudo-relevance feedback,
recall thresholds off so that every stage runs. The "with embedding" figure ingests a small
sample through the real local model with an empty cache.

Both backends are built by the same composition root (RetrievalStack.build), the Redis one with
`redis_url` set, on a throw-away Redis 8 with the search and JSON modules started as the tests
start it (tests/redis_server.py), emptied before each size. Its memory is `INFO memory`
used_memory after loading a size minus that of the emptied server (catalog rows, vector hashes,
keyword hashes and both search indexes), per chunk and extrapolated to a million chunks.

    python benchmarks/retrieval_latency.py [--sizes 1000,10000,100000] [--backends embedded,redis]
                                           [--queries 200] [--embed-sample 32]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from harness import ROOT, parse_args, smoke_set

from ragline.ingestion.service import IngestionService, TextDocument
from ragline.models.embeddings import Embedder, EmbeddingCache
from ragline.retrieval.config import RetrievalConfig
from ragline.retrieval.keyword_index import Bm25sKeywordIndex
from ragline.retrieval.stack import RetrievalStack, local_embedder
from ragline.retrieval.types import SearchParams
from tests.redis_server import RedisServer

EVAL = ROOT.parent / "shared" / "data" / "eval" / "cranfield"
DIM = 384
MODES = ("vector", "keyword", "hybrid")
BACKENDS = ("embedded", "redis")
BATCH = 5000  # documents per ingestion call: bounds memory, keeps the progress line moving
MIB = 1024 * 1024


class RandomVectors(Embedder):
    """The real Embedder (batching, roles) with the model call replaced by random unit vectors."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(model="benchmark/random-384", batch_size=512, cache=None)
        self.rng = np.random.default_rng(seed)

    async def _call(self, texts: list[str], role: str) -> list[list[float]]:
        vectors = self.rng.standard_normal((len(texts), DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors.tolist()


def sentences(data: Path) -> list[str]:
    with (data / "corpus.jsonl").open(encoding="utf-8") as fh:
        texts = [json.loads(line)["text"] for line in fh]
    return [s.strip() + " ." for t in texts for s in t.split(" . ") if len(s.split()) >= 4]


def questions(data: Path) -> list[str]:
    with (data / "queries.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line)["text"] for line in fh]


def synthetic_documents(count: int, pool: list[str], rng: np.random.Generator, offset: int = 0) -> list[TextDocument]:
    """`count` documents of random sentences, cut to at most 450 characters (one chunk each)."""
    docs = []
    for i in range(count):
        text = ""
        while len(text) < 350:
            text += pool[int(rng.integers(len(pool)))] + " "
        docs.append(TextDocument(text[:450].strip(), f"doc {offset + i}", f"synthetic:{offset + i}"))
    return docs


def percentiles(samples_ms: list[float]) -> tuple[float, float]:
    return float(np.percentile(samples_ms, 50)), float(np.percentile(samples_ms, 95))


async def ingest(stack: RetrievalStack, kb_id: str, count: int, pool: list[str], rng: np.random.Generator) -> float:
    """Seconds to ingest `count` synthetic documents through IngestionService."""
    service = IngestionService(stack)
    elapsed = 0.0
    for start in range(0, count, BATCH):
        docs = synthetic_documents(min(BATCH, count - start), pool, rng, offset=start)
        began = time.perf_counter()
        await service.ingest_documents(kb_id, docs)
        elapsed += time.perf_counter() - began
        print(f"\r  ingested {start + len(docs)}/{count}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return elapsed


async def time_queries(stack: RetrievalStack, kb_id: str, mode: str, texts: list[str], vectors: np.ndarray) -> list[float]:
    samples = []
    for text, vector in zip(texts, vectors):
        params = SearchParams(query=text, knowledge_base_ids=[kb_id], match_count=10, disable_recall_thresholds=True,
                              query_embedding=vector.tolist(), disable_vector=mode == "keyword",
                              disable_keyword=mode == "vector")
        began = time.perf_counter()
        await stack.searcher.search(params)
        samples.append((time.perf_counter() - began) * 1000)
    return samples


class Backend:
    """The embedded backend: every size in its own temporary data directory, nothing to measure in Redis."""

    name = "embedded"

    def fresh(self) -> RetrievalConfig:
        return RetrievalConfig(redis_url=None, chroma_url=None)

    def memory(self, kb_id: str) -> dict[str, float]:
        return {}

    def close(self) -> None:
        pass


class RedisBackend(Backend):
    """One throw-away Redis 8 with the search and JSON modules for the whole run, emptied before each size."""

    name = "redis"

    def __init__(self) -> None:
        import redis

        self.server = RedisServer().start()
        self.client = redis.Redis.from_url(self.server.url, decode_responses=True)
        self.baseline = 0

    def fresh(self) -> RetrievalConfig:
        self.server.flush()
        self.baseline = int(self.client.info("memory")["used_memory"])
        return RetrievalConfig(redis_url=self.server.url, chroma_url=None)

    def memory(self, kb_id: str) -> dict[str, float]:
        """Bytes the loaded KB holds in Redis (all of it: catalog, vector and keyword rows, both indexes)."""
        from ragline.retrieval.redis_keyword import index_name as keyword_index
        from ragline.retrieval.redis_vectors import index_name as vector_index

        used = int(self.client.info("memory")["used_memory"]) - self.baseline
        vectors = self.client.ft(vector_index(kb_id)).info()
        keywords = self.client.ft(keyword_index(kb_id)).info()
        return {"used_bytes": float(used), "hnsw_mb": float(vectors["vector_index_sz_mb"]),
                "fulltext_mb": float(keywords["total_index_memory_sz_mb"])}

    def close(self) -> None:
        self.client.close()
        self.server.stop()


async def measure_size(backend: Backend, size: int, queries: int, pool: list[str], texts: list[str]) -> dict[str, Any]:
    rng = np.random.default_rng(size)  # the same documents, queries and vectors for every backend
    with tempfile.TemporaryDirectory(prefix="ragline-latency-") as tmp:
        root = Path(tmp)
        stack = RetrievalStack.build(root, RandomVectors(size), backend.fresh())
        kb = stack.knowledge_bases.create("latency")
        seconds = await ingest(stack, kb.id, size, pool, rng)
        row: dict[str, Any] = {"backend": backend.name, "chunks": size, "ingest_cps": size / seconds,
                               "bm25_build_s": None, **backend.memory(kb.id)}
        keyword = stack.stores["default"].keyword
        if isinstance(keyword, Bm25sKeywordIndex):  # the bm25s index is built lazily on first search
            began = time.perf_counter()
            keyword.snapshot(kb.id)
            row["bm25_build_s"] = time.perf_counter() - began
        picked = [texts[i % len(texts)] for i in range(queries)]
        vectors = rng.standard_normal((queries, DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        for mode in MODES:
            await time_queries(stack, kb.id, mode, picked[:10], vectors[:10])  # warm-up
            row[mode] = percentiles(await time_queries(stack, kb.id, mode, picked, vectors))
        return row


async def embedded_ingestion(count: int, pool: list[str]) -> tuple[float, float]:
    """(chunks/s, passages/s of the model alone) for `count` chunks through the local model, cache empty."""
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory(prefix="ragline-embed-") as tmp:
        root = Path(tmp)
        embedder = local_embedder(root / "cache.sqlite")
        stack = RetrievalStack.build(root, embedder, RetrievalConfig(redis_url=None, chroma_url=None))
        kb = stack.knowledge_bases.create("embedded")
        docs = synthetic_documents(count, pool, rng)
        began = time.perf_counter()
        await IngestionService(stack).ingest_documents(kb.id, docs)
        total = time.perf_counter() - began
        fresh = Embedder(model=embedder.model, cache=EmbeddingCache(root / "other.sqlite"))
        began = time.perf_counter()
        await fresh.embed_passages([d.text for d in docs])
        model = time.perf_counter() - began
    return count / total, count / model


def print_latency(rows: list[dict[str, Any]], queries: int) -> None:
    print(f"\nQuery latency in ms (p50 / p95), {queries} queries, match count 10, query embedding excluded")
    print(f"{'backend':>9} {'chunks':>8} {'vector':>15} {'keyword':>15} {'hybrid':>15} {'ingest chunks/s':>16} {'bm25s build s':>14}")
    for r in rows:
        cells = "".join(f"{r[m][0]:>8.2f} /{r[m][1]:>6.2f}" for m in MODES)
        build = f"{r['bm25_build_s']:>14.2f}" if r["bm25_build_s"] is not None else f"{'-':>14}"
        print(f"{r['backend']:>9} {r['chunks']:>8}{cells} {r['ingest_cps']:>16.0f} {build}")
    print("ingest chunks/s: without embedding time (random vectors through the real ingestion path)")


def print_memory(rows: list[dict[str, Any]]) -> None:
    """Redis used_memory per chunk, extrapolated linearly to a million chunks (the largest size is the best guide)."""
    measured = [r for r in rows if "used_bytes" in r]
    if not measured:
        return
    print(f"\nRedis memory (INFO used_memory after loading, minus the empty server), {DIM}-d float32 vectors, ~400-character chunks")
    print(f"{'chunks':>8} {'used MiB':>10} {'bytes/chunk':>12} {'GiB per 1M chunks':>18} {'HNSW MiB':>10} {'full-text MiB':>14}")
    for r in measured:
        per_chunk = r["used_bytes"] / r["chunks"]
        print(f"{r['chunks']:>8} {r['used_bytes'] / MIB:>10.1f} {per_chunk:>12.0f} {per_chunk * 1e6 / 1024**3:>18.2f} "
              f"{r['hnsw_mb']:>10.1f} {r['fulltext_mb']:>14.1f}")


def open_backend(name: str) -> Backend:
    if name not in BACKENDS:
        raise SystemExit(f"unknown backend {name!r}: choose from {', '.join(BACKENDS)}")
    return RedisBackend() if name == "redis" else Backend()


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--backends", default=",".join(BACKENDS), help="embedded, redis or both")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--embed-sample", type=int, default=32, help="chunks ingested through the real model (0 = skip)")
    parser.add_argument("--data", type=Path, default=EVAL, help="the Cranfield set: sentences of its abstracts, its questions")
    args = parse_args(parser, sizes="40", queries=5, embed_sample=2)
    data = smoke_set(args.data) if args.smoke else args.data
    pool, texts = sentences(data), questions(data)
    rows = []
    for name in (b for b in args.backends.split(",") if b):
        backend = open_backend(name)
        try:
            for size in (int(s) for s in args.sizes.split(",") if s):
                print(f"{name}: {size} chunks ...", file=sys.stderr)
                rows.append(await measure_size(backend, size, args.queries, pool, texts))
        finally:
            backend.close()
    print_latency(rows, args.queries)
    print_memory(rows)
    if args.embed_sample:
        with_model, model_only = await embedded_ingestion(args.embed_sample, pool)
        print(f"with embedding time (local multilingual-e5-small, {args.embed_sample} chunks of ~400 characters): "
              f"{with_model:.2f} chunks/s (the model alone: {model_only:.2f} passages/s)")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
