"""`ragline kb|doc|ingest|search|eval`: knowledge bases and their documents from the command line.

Every command returns an exit code; bad input prints one line on stderr, never a traceback. What
the user named (knowledge bases, files) is checked before the stores and models open, so a typo is
reported in well under a second.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ragline import defaults
from ragline.commands.answer_eval import DEFAULT_TOLERANCE
from ragline.commands.ingest import ingest_paths
from ragline.commands.progress import ProgressBar
from ragline.commands.running import FAILED, INTERRUPTED, describe_failure, run, say_error, split_names
from ragline.contracts.access import Principal
from ragline.retrieval.errors import IngestionError, RetrievalError
from ragline.retrieval.types import (
    ChunkingConfig,
    FAQIndexMode,
    KnowledgeBaseType,
    SearchParams,
)
from ragline.services import Services

Handler = Callable[[argparse.Namespace], int]


def _known_failures() -> tuple[type[Exception], ...]:
    from ragline.models.embeddings import EmbeddingError  # imported when a command failed, not on start-up

    return RetrievalError, EmbeddingError, OSError, ValueError


def guarded(func: Callable[[argparse.Namespace, Services], Any]) -> Handler:
    """The command with the process's services (built once, closed after) in one event loop; known
    failures become one `ragline: error: ...` line and exit code 1."""

    @functools.wraps(func)
    def command(args: argparse.Namespace) -> int:
        async def main() -> int:
            services = Services.from_settings()
            try:
                result = func(args, services)
                if asyncio.iscoroutine(result):
                    result = await result
                return int(result or 0)
            finally:
                await services.aclose()

        try:
            return run(main())
        except _known_failures() as exc:
            say_error(describe_failure(exc))
            return FAILED
        except KeyboardInterrupt:
            return INTERRUPTED

    return command


def _snippet(text: str, width: int = 70) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


async def kb_create(args: argparse.Namespace, services: Services) -> int:
    if args.graph and (reason := services.graph_store.unavailable_reason):  # refused before the base exists
        say_error(reason)
        return FAILED
    stack = services.retrieval
    chunking = ChunkingConfig(chunk_size=args.chunk_size, chunk_overlap=args.chunk_overlap, parent_child=args.parent_child)
    kb = stack.knowledge_bases.create(
        args.name, tenant_id=args.tenant, type=KnowledgeBaseType(args.type), description=args.description,
        tags=[t.strip() for t in args.tags.split(",") if t.strip()], chunking=chunking,
        faq_index_mode=FAQIndexMode(args.faq_index_mode), wiki_enabled=args.wiki,
    )
    if args.graph:
        await services.graph_store.set_extraction_enabled(kb.id, True)
    print(f"created {kb.type.value} knowledge base {kb.name} ({kb.id}), embeddings: {kb.embedding_model}"
          + (", entity graph extraction on" if args.graph else "") + (", wiki pages on" if args.wiki else ""))
    return 0


def kb_list(args: argparse.Namespace, services: Services) -> int:
    stack = services.retrieval
    kbs = stack.knowledge_bases.list(Principal.operator_of(args.tenant))
    if not kbs:
        print("no knowledge bases")
        return 0
    print(f"{'name':<24} {'type':<9} {'docs':>5} {'chunks':>7}  {'embedding model':<32} tags")
    for kb in kbs:
        docs = stack.catalog.list_knowledge(kb.id)
        print(f"{kb.name:<24} {kb.type.value:<9} {len(docs):>5} {sum(d.chunk_count for d in docs):>7}  "
              f"{kb.embedding_model:<32} {','.join(kb.tags)}")
    return 0


async def kb_delete(args: argparse.Namespace, services: Services) -> int:
    kb = services.find_knowledge_base(args.name, args.tenant)  # a wrong name fails before the stores open
    stack = services.retrieval
    await stack.knowledge_bases.delete(kb.id, Principal.operator_of(args.tenant))
    await services.graph_store.delete_knowledge_base(kb.id)
    print(f"deleted knowledge base {kb.name}")
    return 0


async def kb_update(args: argparse.Namespace, services: Services) -> int:
    kb = services.find_knowledge_base(args.name, args.tenant)  # a wrong name fails before the stores open
    stack = services.retrieval
    tags = None if args.tags is None else [t.strip() for t in args.tags.split(",") if t.strip()]
    if args.rename is None and args.description is None and tags is None and args.shared is None and args.wiki is None:
        raise RetrievalError("nothing to update: give --rename, --description, --tags, --shared/--private or --wiki/--no-wiki")
    kb = stack.knowledge_bases.update(kb.id, Principal.operator_of(args.tenant), name=args.rename, description=args.description,
                                      tags=tags, shared=args.shared, wiki_enabled=args.wiki)
    print(f"updated knowledge base {kb.name} ({kb.id}): description {kb.description!r}, "
          f"tags {','.join(kb.tags) or '-'}, {'shared' if kb.shared else 'private'}, wiki {'on' if kb.wiki_enabled else 'off'}")
    if args.wiki is not None:  # write the pages of the documents already there, or remove them
        await _settle_wiki(services, kb.id)
    return 0


async def _settle_wiki(services: Services, kb_id: str, *, rebuild: bool = True) -> int:
    """Rebuild the base's wiki now (or wait for the rebuild a document change started) and print how
    it went; exit code 1 when a page failed. The CLI process ends with the command, so it waits for
    the pages a server would build in the background."""
    if rebuild:
        status = await services.wiki.rebuild(kb_id)
    else:
        await services.wiki.drain()
        status = services.wiki.status(kb_id)
    print(f"wiki: {status.pages} page(s); written {len(status.written)}, unchanged {status.unchanged}, removed {status.removed}")
    for title, error in status.failed.items():
        say_error(f"wiki page {title!r} was not written: {error}")
    if status.error:
        say_error(f"the wiki was not rebuilt: {status.error}")
    return 1 if status.failed or status.error else 0


async def kb_wiki(args: argparse.Namespace, services: Services) -> int:
    kb = services.find_knowledge_base(args.name, args.tenant)
    if not kb.wiki_enabled:
        print(f"the wiki of {kb.name} is off (turn it on with `ragline kb update {kb.name} --wiki`); its pages are removed")
    return await _settle_wiki(services, kb.id)


async def kb_reindex(args: argparse.Namespace, services: Services) -> int:
    """Re-chunk every document of a knowledge base from its stored text with the current chunker and
    settings (asked for, never done behind a user's back; a wiki page is rebuilt by its wiki)."""
    from ragline.ingestion.wiki import is_wiki_document

    kb = services.find_knowledge_base(args.name, args.tenant)
    docs = [d for d in services.retrieval.catalog.list_knowledge(kb.id) if not is_wiki_document(d)]
    failed = 0
    for doc in docs:
        try:
            await services.ingestion.reparse(kb.id, doc.id, args.tenant)
        except IngestionError as exc:
            failed += 1
            print(f"  failed: {doc.title}: {exc}", file=sys.stderr)
    print(f"reindexed {len(docs) - failed} document(s) of {kb.name}" + (f"; {failed} failed" if failed else ""))
    return 1 if failed else 0


def doc_list(args: argparse.Namespace, services: Services) -> int:
    kb = services.find_knowledge_base(args.kb, args.tenant)  # a wrong name fails before the stores open
    stack = services.retrieval
    docs = stack.catalog.list_knowledge(kb.id)
    if not docs:
        print(f"no documents in {kb.name}")
        return 0
    print(f"{'id':<32}  {'title':<30} {'type':<5} {'chunks':>6}  {'updated':<16}  source")
    for d in docs:
        print(f"{d.id:<32}  {_snippet(d.title, 30):<30} {d.file_type:<5} {d.chunk_count:>6}  "
              f"{d.updated_at:%Y-%m-%d %H:%M}  {d.source}")
    return 0


def resolve_document(docs: list[Any], ref: str) -> Any:
    """A document by id, by source (a path is resolved first), or by a title no other document has."""
    by_id = [d for d in docs if d.id == ref]
    sources = {ref, str(Path(ref).expanduser().resolve())}
    by_source = [d for d in docs if d.source in sources]
    by_title = [d for d in docs if d.title == ref]
    for found in (by_id, by_source):
        if found:
            return found[0]
    if len(by_title) == 1:
        return by_title[0]
    if by_title:
        raise RetrievalError(f"{len(by_title)} documents are titled {ref!r}; name one by id: "
                             + ", ".join(d.id for d in by_title))
    raise RetrievalError(f"no document {ref!r} (give an id, a source path or a title; see `ragline doc list`)")


async def doc_delete(args: argparse.Namespace, services: Services) -> int:

    kb = services.find_knowledge_base(args.kb, args.tenant)  # a wrong name fails before the stores open
    stack = services.retrieval
    docs = stack.catalog.list_knowledge(kb.id)
    targets = [resolve_document(docs, ref) for ref in args.documents]  # all resolved before any is deleted
    service = services.ingestion
    for doc in {d.id: d for d in targets}.values():
        await service.delete_knowledge(kb.id, doc.id, args.tenant)
        print(f"deleted {doc.title} ({doc.id}, {doc.chunk_count} chunk(s)) from {kb.name}")
    return await _settle_wiki(services, kb.id, rebuild=False) if kb.wiki_enabled else 0


async def ingest(args: argparse.Namespace, services: Services) -> int:
    code = await ingest_paths(args, services)
    kb = services.find_knowledge_base(args.kb, args.tenant)
    if kb.wiki_enabled and not args.dry_run:
        code = max(code, await _settle_wiki(services, kb.id, rebuild=False))
    return code


async def search(args: argparse.Namespace, services: Services) -> int:
    kb_ids = [services.find_knowledge_base(name, args.tenant).id for name in args.kb]
    stack = services.retrieval
    reader = Principal(args.tenant, args.user, frozenset(split_names(args.groups))) if args.user else Principal.operator_of(args.tenant)
    params = SearchParams(query=args.query, knowledge_base_ids=kb_ids, tenant_id=args.tenant, reader=reader, match_count=args.top_k,
                          disable_vector=args.mode == "keyword", disable_keyword=args.mode == "vector",
                          disable_recall_thresholds=args.no_thresholds)
    results = await stack.searcher.search(params)
    if not results:
        print("no results")
        return 0
    print(f"{'#':>3} {'score':>6}  {'match':<8} {'document':<28} snippet")
    for i, r in enumerate(results, start=1):
        print(f"{i:>3} {r.score:>6.3f}  {r.match_type.value:<8} {_snippet(r.knowledge_title, 28):<28} {_snippet(r.content)}")
    return 0


def metric_table(metrics: dict[str, dict[str, float]]) -> str:
    from ragline.retrieval.metrics import MEANINGS, METRICS

    lines = [f"{'retriever':<10}" + "".join(f"{m:>12}" for m in METRICS)]
    for mode, values in metrics.items():
        lines.append(f"{mode:<10}" + "".join(f"{values[m]:>12.4f}" for m in METRICS))
    lines.append("")
    lines += [f"{m:<11} {MEANINGS[m]}" for m in METRICS]
    return "\n".join(lines)


async def evaluate(args: argparse.Namespace, services: Services) -> int:
    from ragline.evaluation.retrieval import evaluate as run_eval
    from ragline.retrieval.config import RetrievalConfig

    data_dir = Path(args.data_dir)
    if not data_dir.is_dir():
        raise RetrievalError(f"{data_dir} is not a directory")
    bar = ProgressBar("")
    if args.answers:
        from ragline.commands.answer_eval import evaluate_answers

        return await evaluate_answers(args, services, bar)
    try:
        report = await run_eval(data_dir, services.embedder, config=RetrievalConfig.from_settings(services.settings), max_queries=args.max_queries,
                                chunk_size=args.chunk_size, progress=lambda s, d, t: bar.update(d, t, s))
    finally:
        bar.close()
    print(f"{report.name}: {report.documents} documents, {report.queries} queries")
    print(metric_table(report.metrics))
    if args.output:
        Path(args.output).write_text(json.dumps({"name": report.name, "metrics": report.metrics}, indent=2))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `kb`, `doc`, `ingest`, `search` and `eval` to the ragline command."""
    tenant = argparse.ArgumentParser(add_help=False)
    tenant.add_argument("--tenant", default="default", help="tenant that owns the knowledge bases")

    kb = subparsers.add_parser("kb", help="create, list, update or delete knowledge bases")
    kb_sub = kb.add_subparsers(dest="kb_command", required=True)
    create = kb_sub.add_parser("create", parents=[tenant], help="create a knowledge base")
    create.add_argument("name")
    create.add_argument("--type", choices=[t.value for t in KnowledgeBaseType], default="document")
    create.add_argument("--description", default="")
    create.add_argument("--tags", default="", help="comma-separated tags")
    create.add_argument("--chunk-size", type=int, default=defaults.CHUNK_SIZE)
    create.add_argument("--chunk-overlap", type=int, default=defaults.CHUNK_OVERLAP)
    create.add_argument("--parent-child", action="store_true", help="index 384-char children of 4096-char parents")
    create.add_argument("--faq-index-mode", choices=[m.value for m in FAQIndexMode], default="question_answer")
    create.add_argument("--graph", action="store_true", help="also extract entities and relationships into the graph (an LLM call per chunk)")
    create.add_argument("--wiki", action="store_true", help="the chat model writes wiki pages from the documents (an LLM call per topic)")
    create.set_defaults(func=guarded(kb_create))
    listing = kb_sub.add_parser("list", parents=[tenant], help="list knowledge bases")
    listing.set_defaults(func=guarded(kb_list))
    delete = kb_sub.add_parser("delete", parents=[tenant], help="delete a knowledge base and its index rows")
    delete.add_argument("name")
    delete.set_defaults(func=guarded(kb_delete))
    update = kb_sub.add_parser("update", parents=[tenant], help="rename a knowledge base or change its description, tags, sharing")
    update.add_argument("name")
    update.add_argument("--rename", default=None, help="new name")
    update.add_argument("--description", default=None)
    update.add_argument("--tags", default=None, help="comma-separated tags, replacing the current ones ('' clears)")
    sharing = update.add_mutually_exclusive_group()
    sharing.add_argument("--shared", dest="shared", action="store_true", default=None, help="readable by every tenant")
    sharing.add_argument("--private", dest="shared", action="store_false", help="readable by its tenant only")
    wiki = update.add_mutually_exclusive_group()
    wiki.add_argument("--wiki", dest="wiki", action="store_true", default=None, help="write wiki pages from the documents")
    wiki.add_argument("--no-wiki", dest="wiki", action="store_false", help="stop the wiki and remove its pages")
    update.set_defaults(func=guarded(kb_update))
    reindex = kb_sub.add_parser("reindex", parents=[tenant],
                                help="re-chunk every document from its stored text with the current chunker (re-ingest a PDF for its pages)")
    reindex.add_argument("name")
    reindex.set_defaults(func=guarded(kb_reindex))
    rebuild = kb_sub.add_parser("wiki", parents=[tenant], help="rebuild the wiki pages of a knowledge base now")
    rebuild.add_argument("name")
    rebuild.set_defaults(func=guarded(kb_wiki))

    doc = subparsers.add_parser("doc", help="list or delete the documents of a knowledge base")
    doc_sub = doc.add_subparsers(dest="doc_command", required=True)
    doc_ls = doc_sub.add_parser("list", parents=[tenant], help="list the documents of a knowledge base")
    doc_ls.add_argument("--kb", required=True, help="knowledge base name")
    doc_ls.set_defaults(func=guarded(doc_list))
    doc_rm = doc_sub.add_parser("delete", parents=[tenant], help="delete documents with their vectors and keyword rows")
    doc_rm.add_argument("documents", nargs="+", metavar="DOC", help="document id, source path or title")
    doc_rm.add_argument("--kb", required=True, help="knowledge base name")
    doc_rm.set_defaults(func=guarded(doc_delete))

    ing = subparsers.add_parser("ingest", parents=[tenant], help="ingest files or folders into a knowledge base")
    ing.add_argument("paths", nargs="+", metavar="PATH")
    ing.add_argument("--kb", required=True, help="knowledge base name")
    ing.add_argument("--dry-run", action="store_true", help="FAQ import: validate and report, store nothing")
    ing.set_defaults(func=guarded(ingest))

    find = subparsers.add_parser("search", parents=[tenant], help="hybrid search in knowledge bases")
    find.add_argument("query")
    find.add_argument("--kb", required=True, action="append", help="knowledge base name (repeat for several)")
    find.add_argument("--top-k", type=int, default=10)
    find.add_argument("--mode", choices=["hybrid", "vector", "keyword"], default="hybrid")
    find.add_argument("--no-thresholds", action="store_true", help="keep hits below the recall thresholds")
    find.add_argument("--user", default="", help="search as this user: restricted documents it may not read are left out")
    find.add_argument("--groups", default="", help="that user's groups, comma-separated")
    find.set_defaults(func=guarded(search))

    ev = subparsers.add_parser("eval", help="score retrieval (or, with --answers, whole answers) on a BEIR-layout folder")
    ev.add_argument("data_dir")
    ev.add_argument("--max-queries", "--limit", dest="max_queries", type=int, default=None,
                    help="questions to use (retrieval: the first N, default all; --answers: N sampled with --seed, default 20)")
    ev.add_argument("--chunk-size", type=int, default=0, help="0 = one chunk per document (BEIR judges documents)")
    ev.add_argument("--json", "--output", dest="output", default=None,
                    help="write the report here (retrieval: only when given; --answers: default ./answers-eval-NAME.json)")
    qa = ev.add_argument_group("answer evaluation (needs answers.jsonl)")
    qa.add_argument("--answers", action="store_true", help="ask sampled questions through the whole graph and score the answers")
    qa.add_argument("--seed", type=int, default=0, help="sampling seed: the same seed picks the same questions")
    qa.add_argument("--short-answers", action="store_true", help='system prompt "reply with the shortest exact phrase from the sources"')
    qa.add_argument("--abstention", action="store_true",
                    help="ask the questions again without their gold paragraphs and report how many end in the fallback (doubles the run)")
    qa.add_argument("--baseline", default=None, metavar="REPORT", help="compare with an earlier report; exit 3 when a quality metric drops")
    qa.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE, help=f"drop allowed by --baseline before failing (default {DEFAULT_TOLERANCE})")
    ev.set_defaults(func=guarded(evaluate))
