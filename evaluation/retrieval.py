"""`ragline eval`: ingest a BEIR-layout set into a scratch KB and score vector, keyword and hybrid.

BEIR judges whole documents, so by default every corpus document is one chunk (chunk_size 0 means
"no splitting"); with a chunk size, a document ranks at its best chunk.
"""

from __future__ import annotations

import json
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ragline.contracts.access import Principal
from ragline.contracts.passages import SearchResult
from ragline.models.embeddings import Embedder
from ragline.retrieval.config import RetrievalConfig
from ragline.retrieval.errors import RetrievalError
from ragline.retrieval.metrics import score_run
from ragline.retrieval.stack import RetrievalStack
from ragline.retrieval.types import ChunkingConfig, SearchParams

Progress = Callable[[str, int, int], None]  # (stage, done, total)
MODES = ("vector", "keyword", "hybrid")
WHOLE_DOCUMENT = 1_000_000  # characters: larger than any evaluation document


@dataclass
class BeirSet:
    name: str
    corpus: list[dict[str, str]]
    queries: list[dict[str, str]]
    qrels: dict[str, dict[str, int]]


@dataclass
class EvalReport:
    name: str
    documents: int
    queries: int
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)  # mode -> metric -> value
    runs: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # mode -> query -> doc ids


def doc_text(doc: dict[str, str]) -> str:
    """Title (underscores as spaces) above the text, unless the text already starts with it."""
    title = (doc.get("title") or "").replace("_", " ").strip()
    text = (doc.get("text") or "").strip()
    if title and not text.lower().startswith(title.lower().rstrip(" .")):
        return f"{title}\n{text}".strip()
    return text


def doc_title(doc: dict[str, str]) -> str:
    """The BEIR title (underscores as spaces): it is the document's title field in the keyword index."""
    return (doc.get("title") or "").replace("_", " ").strip()


def _read_jsonl(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_beir(data_dir: Path, max_queries: int | None = None) -> BeirSet:
    """corpus.jsonl, queries.jsonl and qrels.tsv (header `query-id corpus-id score`)."""
    missing = [n for n in ("corpus.jsonl", "queries.jsonl", "qrels.tsv") if not (data_dir / n).is_file()]
    if missing:
        raise RetrievalError(f"{data_dir} is not a BEIR folder: missing {', '.join(missing)}")
    qrels: dict[str, dict[str, int]] = {}
    with (data_dir / "qrels.tsv").open(encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            parts = line.rstrip("\n").split("\t")
            if i == 0 and parts[0] == "query-id" or len(parts) < 3:
                continue
            qrels.setdefault(parts[0], {})[parts[1]] = int(float(parts[2]))
    queries = [q for q in _read_jsonl(data_dir / "queries.jsonl") if q["_id"] in qrels and q.get("text", "").strip()]
    if max_queries:
        queries = queries[:max_queries]
    return BeirSet(data_dir.name, _read_jsonl(data_dir / "corpus.jsonl"), queries, qrels)


def _doc_ranking(results: list[SearchResult], beir_id_of: dict[str, str]) -> list[str]:
    ranked: list[str] = []
    seen: set[str] = set()
    for r in results:
        doc = beir_id_of.get(r.knowledge_id)
        if doc is not None and doc not in seen:
            seen.add(doc)
            ranked.append(doc)
    return ranked


async def evaluate(data_dir: Path, embedder: Embedder, *, max_queries: int | None = None, chunk_size: int = 0,
                   config: RetrievalConfig | None = None, progress: Progress | None = None,
                   work_dir: Path | None = None, depth: int = 100) -> EvalReport:
    """Ingest the corpus into a scratch KB (a temporary folder unless `work_dir`), then search every query."""
    from ragline.ingestion.service import IngestionService, TextDocument

    beir = load_beir(data_dir, max_queries)
    with tempfile.TemporaryDirectory(prefix="ragline-eval-") as tmp:
        root = work_dir or Path(tmp)
        stack = RetrievalStack.build(root, embedder, config or RetrievalConfig())
        chunking = ChunkingConfig(chunk_size=chunk_size or WHOLE_DOCUMENT, chunk_overlap=0 if not chunk_size else 80)
        # shared mode: the scratch KB lives in Redis, beside others' data; a unique name, removed at the end
        name = f"eval-{beir.name}-{uuid.uuid4().hex[:8]}" if stack.config.redis_url else f"eval-{beir.name}"
        kb = stack.knowledge_bases.create(name, chunking=chunking)
        try:
            # an empty document (Cranfield 471 and 995) can match nothing, and ingestion refuses it
            docs = [TextDocument(doc_text(d), doc_title(d), f"beir:{d['_id']}") for d in beir.corpus if doc_text(d).strip()]
            stage = lambda done, total: progress and progress("embedding corpus", done, total)  # noqa: E731
            knowledge = await IngestionService(stack).ingest_documents(kb.id, docs, progress=stage)
            beir_id_of = {k.id: k.source.removeprefix("beir:") for k in knowledge}
            report = EvalReport(beir.name, len(beir.corpus), len(beir.queries))
            runs: dict[str, dict[str, list[str]]] = {mode: {} for mode in MODES}
            for i, query in enumerate(beir.queries):
                vector = await embedder.embed_query(query["text"])
                for mode in MODES:
                    params = SearchParams(query=query["text"], knowledge_base_ids=[kb.id], match_count=depth,
                                          disable_recall_thresholds=True, query_embedding=vector,
                                          disable_vector=mode == "keyword", disable_keyword=mode == "vector")
                    runs[mode][query["_id"]] = _doc_ranking(await stack.searcher.search(params), beir_id_of)
                if progress:
                    progress("searching", i + 1, len(beir.queries))
            report.runs = runs
            report.metrics = {mode: score_run(runs[mode], beir.qrels) for mode in MODES}
        finally:
            if stack.config.redis_url:
                await stack.knowledge_bases.delete(kb.id, Principal.operator_of(kb.tenant_id))
    return report
