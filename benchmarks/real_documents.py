"""Real documents nobody here wrote: man pages, package documentation and PDFs from this machine.

    python benchmarks/real_documents.py [--answers] [--data-dir DIR] [--only ID,ID]

The corpus is built at run time from files a Debian machine has: the man pages of 20 commands
(rendered with `man -P cat`), two PDFs, and README, Markdown and HTML files under /usr/share/doc
(a missing file is skipped and named). The questions in `data/real_documents.jsonl` were checked
by reading those files; each names its document, its accepted answers, and a `needle`: words
the passage that answers it holds, so a ranking can be judged without a human.

Retrieval (always): for each question, the rank of the answering passage among the first 10
hits of keyword search alone, vector search alone, and the default hybrid search; the table
gives how often it is in the top 3 and the top 10.

Answers (`--answers`): each question through the whole `ragline` graph with the configured model
(the local one by default), scored as right (an accepted answer in the reply, and every `also`
part), "not found" (the fallback although the passage is there), or wrong; and how often a wrong
answer showed a source (the goal: never). The knowledge base lives in `--data-dir` (default
~/.cache/ragline/real-documents), so a second run embeds nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import parse_args, scratch_dir, use_data_dir

QUESTIONS = Path(__file__).resolve().parent / "data" / "real_documents.jsonl"
MAN_PAGES = ("wget", "grep", "zstd", "curl", "tar", "gzip", "xz", "bzip2", "ssh", "sed", "find", "sort", "ls",
             "date", "split", "head", "tail", "less", "diff", "chmod")
DOCUMENTS = (
    "/usr/share/doc/libtasn1-doc/libtasn1.pdf",
    "/usr/share/doc/shared-mime-info/shared-mime-info-spec.pdf",
    "/usr/share/doc/base-passwd/users-and-groups.html",
    "/usr/share/doc/procps/bugs.md",
    "/usr/share/doc/libsodium23/README.markdown",
    "/usr/share/doc/python3-httplib2/README.md",
    "/usr/share/doc/dpkg/spec/triggers.txt",
    "/usr/share/doc/libffi8/html/Introduction.html",
    "/usr/share/doc/libffi8/html/Using-libffi.html",
    "/usr/share/doc/libglib2.0-0/README.md",
    "/usr/share/doc/libpango-1.0-0/README.md",
    "/usr/share/doc/libgmp-dev/README",
)
TOP = 10
KB_NAME = "real-documents"


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    answers: tuple[str, ...]
    also: tuple[str, ...]
    needle: str
    file: str


def load_questions(only: set[str]) -> list[Question]:
    rows = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [Question(r["id"], r["question"], tuple(r["answers"]), tuple(r.get("also", ())), r["needle"], r["file"])
            for r in rows if not only or r["id"] in only]


def flat(text: str) -> str:
    return " ".join(text.split())


def render_man_page(name: str, folder: Path) -> Path | None:
    """The man page as plain text (80 columns, no overstrike), or None when this machine lacks it."""
    rendered = subprocess.run(["man", "-P", "cat", name], capture_output=True, text=True,
                              env={**os.environ, "MANWIDTH": "80", "MAN_KEEP_FORMATTING": "0"})
    if rendered.returncode != 0 or not rendered.stdout.strip():
        return None
    plain = subprocess.run(["col", "-b"], input=rendered.stdout, capture_output=True, text=True).stdout
    path = folder / f"{name}.txt"
    path.write_text(plain, encoding="utf-8")
    return path


def corpus_files(folder: Path, only: set[str] | None = None) -> tuple[list[Path], list[str]]:
    """The corpus's files on this machine (`only`: those of these names), and what it lacks."""
    folder.mkdir(parents=True, exist_ok=True)
    files, missing = [], []
    for name in MAN_PAGES if only is None else [m for m in MAN_PAGES if m in only]:
        path = render_man_page(name, folder) if shutil.which("man") else None
        (files.append(path) if path else missing.append(f"man {name}"))
    for raw in DOCUMENTS if only is None else [d for d in DOCUMENTS if Path(d).name in only]:
        path = Path(raw)
        if not path.is_file():
            missing.append(raw)
        elif path.suffix:
            files.append(path)
        else:  # a README without an extension is plain text: named so, after its package
            copy = folder / f"{path.parent.name}-{path.name}.txt"
            shutil.copyfile(path, copy)
            files.append(copy)
    return files, missing


async def build_kb(services: Any, files: list[Path]) -> Any:
    from ragline.contracts.access import Principal
    from ragline.ingestion.parsers import parse_file
    from ragline.ingestion.service import IngestionService, TextDocument
    from ragline.retrieval.errors import KnowledgeBaseNotFoundError

    stack = services.retrieval
    try:
        kb = stack.knowledge_bases.get_by_name(KB_NAME, Principal.operator_of("default"))
    except KnowledgeBaseNotFoundError:
        kb = stack.knowledge_bases.create(KB_NAME, description="man pages, package documentation and PDFs of this machine")
    docs = []
    for path in files:
        parsed = await asyncio.to_thread(parse_file, path)
        docs.append(TextDocument.parsed(parsed, path.name, path.name))
    started = time.perf_counter()
    await IngestionService(stack).ingest_documents(kb.id, docs, progress=lambda done, total: print(
        f"\rindexing {done}/{total}", end="", file=sys.stderr, flush=True))
    print(f"\rindexed {len(docs)} documents in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return kb


def answering_rank(results: list[Any], question: Question, titles: dict[str, str]) -> int | None:
    """1-based rank of the first hit from the question's document that holds the needle."""
    needle = flat(question.needle)
    for rank, result in enumerate(results, start=1):
        title = titles.get(result.knowledge_id, "")
        if question.file in (title, Path(title).stem) and needle in flat(result.content):
            return rank
    return None


def fusion_variants(settings: Any, grid: bool) -> dict[str, Any]:
    """'hybrid': the configured search; with --grid, other fusion weights through the same path."""
    variants = {"hybrid": settings}
    if grid:
        variants |= {f"z-score {w:.1f}/{1 - w:.1f}": settings.model_copy(update={"fusion": "zscore", "fusion_vector_weight": w,
                                                                                   "fusion_keyword_weight": round(1 - w, 2)})
                     for w in (0.3, 0.4, 0.5, 0.6)}
        variants["seed RRF 60/.7/.3"] = settings.model_copy(update={"fusion": "rrf"})
    return variants


async def rankings(services: Any, kb: Any, questions: list[Question], grid: bool = False) -> dict[str, dict[str, int | None]]:
    from ragline.contracts.request import PipelineRequest
    from ragline.retrieval.types import SearchParams

    stack = services.retrieval
    titles = {k.id: k.title for k in stack.catalog.list_knowledge(kb.id)}
    defaults = PipelineRequest(query="q")
    configured = stack.searcher.settings
    ranks: dict[str, dict[str, int | None]] = {}
    for question in questions:
        vector = await stack.embedders.for_kb(kb).embed_query(question.question)
        ranks[question.id] = {}
        for mode in ("keyword", "vector", "hybrid"):
            params = SearchParams(query=question.question, knowledge_base_ids=[kb.id], match_count=TOP,
                                  vector_threshold=defaults.vector_threshold, keyword_threshold=defaults.keyword_threshold,
                                  query_embedding=vector, disable_vector=mode == "keyword", disable_keyword=mode == "vector")
            for name, settings in (fusion_variants(configured, grid) if mode == "hybrid" else {mode: configured}).items():
                stack.searcher.settings = settings
                ranks[question.id][name] = answering_rank(await stack.searcher.search(params), question, titles)
        stack.searcher.settings = configured
    return ranks


def retrieval_table(ranks: dict[str, dict[str, int | None]]) -> str:
    names = list(next(iter(ranks.values())))
    lines = [f"{'retriever':<20}{'top 3':>8}{'top 10':>8}"]
    for mode in names:
        found = [r[mode] for r in ranks.values()]
        top3 = sum(1 for rank in found if rank is not None and rank <= 3)
        top10 = sum(1 for rank in found if rank is not None)
        lines.append(f"{mode:<20}{top3:>5}/{len(found)}{top10:>5}/{len(found)}")
    return "\n".join(lines)


async def answers(services: Any, kb: Any, questions: list[Question], max_tokens: int | None = None) -> list[dict[str, Any]]:
    from ragline.checkpoints.savers import memory_saver
    from ragline.contracts.request import PipelineRequest, SummaryConfig
    from ragline.evaluation import scoring
    from ragline.evaluation.answers import ask, warm_up
    from ragline.graph.graphs import build_graph

    graph = build_graph("ragline", checkpointer=memory_saver())
    await warm_up(services)
    rows = []
    for question in questions:
        request = PipelineRequest(query=question.question, knowledge_base_ids=(kb.id,), summary=SummaryConfig(max_tokens=max_tokens))
        turn = await ask(graph, services, request, "default")
        shown = scoring.strip_tags(turn.answer)
        right = scoring.contains_any(shown, question.answers) and all(scoring.contains(shown, part) for part in question.also)
        outcome = "error" if turn.error else "not found" if turn.fallback else "right" if right else "wrong"
        rows.append({"id": question.id, "outcome": outcome, "with_source": bool(scoring.citations(turn.answer)), "answer": shown,
                     "first_token_s": turn.first_token_s})
        print(f"{question.id:<22}{outcome:<10}{'source' if rows[-1]['with_source'] else '':<8}{shown[:90]}", flush=True)
    return rows


def answer_table(rows: list[dict[str, Any]]) -> str:
    count = {name: sum(1 for r in rows if r["outcome"] == name) for name in ("right", "wrong", "not found", "error")}
    wrong_sourced = sum(1 for r in rows if r["outcome"] == "wrong" and r["with_source"])
    first = sorted(r["first_token_s"] for r in rows if r["first_token_s"] is not None)
    median = f"{first[len(first) // 2]:.1f} s" if first else "-"
    return (f"right {count['right']}/{len(rows)}, wrong {count['wrong']} (with a source: {wrong_sourced}), "
            f"not found {count['not found']}, errors {count['error']}; first token p50 {median}")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--answers", action="store_true", help="also answer every question through the graph")
    parser.add_argument("--data-dir", default=str(Path.home() / ".cache" / "ragline" / "real-documents"))
    parser.add_argument("--only", default="", help="comma-separated question ids")
    parser.add_argument("--grid", action="store_true", help="also rank with other fusion weights")
    parser.add_argument("--just-their-files", action="store_true", help="index only the documents the questions asked are about")
    parser.add_argument("--max-tokens", type=int, help="cap each answer (default: the model's own limit)")
    # --smoke: one question on a short man page, the corpus cut to it, answered in 24 tokens
    args = parse_args(parser, only="head-lines", just_their_files=True, answers=True, max_tokens=24, data_dir=None)
    data_dir = Path(args.data_dir) if args.data_dir else scratch_dir("ragline-real-documents-")
    use_data_dir(data_dir)
    from ragline.services import Services

    questions = load_questions({q for q in args.only.split(",") if q})
    files, missing = corpus_files(data_dir / "files", {q.file for q in questions} if args.just_their_files else None)
    if missing:
        print(f"not on this machine, left out: {', '.join(missing)}", file=sys.stderr)
    questions = [q for q in questions if any(f.name == q.file or f.stem == q.file for f in files)]
    services = Services.from_settings()
    try:
        kb = await build_kb(services, files)
        chunks = len(services.retrieval.catalog.chunk_ids_of([k.id for k in services.retrieval.catalog.list_knowledge(kb.id)]))
        ranks = await rankings(services, kb, questions, args.grid)
        print(f"\n{len(files)} documents, {chunks} chunks, {len(questions)} questions; the answering passage's rank:")
        print(retrieval_table(ranks))
        misses = {q: r for q, r in ranks.items() if r["hybrid"] is None or r["hybrid"] > 3}
        if misses:
            print("hybrid missed the top 3 for: " + ", ".join(f"{q} (keyword {r['keyword']}, vector {r['vector']}, hybrid {r['hybrid']})"
                                                              for q, r in misses.items()))
        if args.answers:
            print()
            print(answer_table(await answers(services, kb, questions, args.max_tokens)))
    finally:
        await services.aclose()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
