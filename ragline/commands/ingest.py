"""`ragline ingest PATH... --kb NAME`: files and folders into a knowledge base, one file at a time.

Each file is parsed, chunked, embedded and stored on its own, so one bad file never stops the
others: it fails with its reason and the rest go on. A folder's files of a type Ragline does not
read are skipped, and said so. Progress names the file and its stage; the summary counts what was
ingested, unchanged, skipped and failed. Ctrl-C stops within a second: the files already stored
stay, the one in progress is not stored (the ingestion service never keeps half a document), and
running the same command again continues, since unchanged files are not embedded again.
"""

from __future__ import annotations

import argparse
import asyncio
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ragline.commands.progress import ProgressBar, on_terminal
from ragline.commands.running import FAILED
from ragline.retrieval.errors import RetrievalError

if TYPE_CHECKING:
    from ragline.retrieval.types import Knowledge, KnowledgeBase
    from ragline.services import Services

Status = Literal["ingested", "unchanged", "skipped", "failed"]
LISTED_PER_REASON = 10  # a folder with a thousand skipped files names ten of them, and counts the rest


@dataclass
class Outcome:
    path: Path
    status: Status
    detail: str = ""  # the reason, for skipped and failed files
    chunks: int = 0
    knowledge: Knowledge | None = None  # the stored document, when ingested


@dataclass
class Tally:
    outcomes: list[Outcome] = field(default_factory=list)
    unit: str = "chunk(s)"  # what an ingested file adds: chunks, or an FAQ file's entries

    def of(self, status: Status) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == status]

    def summary(self, kb_name: str) -> str:
        ingested = self.of("ingested")
        head = f"ingested {len(ingested)} document(s), {sum(o.chunks for o in ingested):,} {self.unit} into {kb_name}"
        counts = [f"{len(self.of(s))} {s}" for s in ("unchanged", "skipped", "failed") if self.of(s)]
        lines = [head + ("; " + ", ".join(counts) if counts else "")]
        for status in ("skipped", "failed"):
            by_reason: dict[str, list[Path]] = defaultdict(list)
            for outcome in self.of(status):
                by_reason[outcome.detail].append(outcome.path)
            for reason, paths in by_reason.items():
                names = ", ".join(str(p) for p in paths[:LISTED_PER_REASON])
                more = f" and {len(paths) - LISTED_PER_REASON} more" if len(paths) > LISTED_PER_REASON else ""
                lines.append(f"  {status}: {names}{more}: {reason}")
        return "\n".join(lines)


def collect(paths: list[str]) -> tuple[list[Path], list[Outcome]]:
    """The files to ingest, and a folder's files that are skipped with their reason. Every path is
    checked before any file is read: a typo fails the command at once."""
    from ragline.ingestion.parsers import SUPPORTED

    missing = [raw for raw in paths if not Path(raw).exists()]
    if missing:
        raise RetrievalError(f"{', '.join(missing)}: no such file or folder")
    files: list[Path] = []
    skipped: list[Outcome] = []
    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            files.append(path)  # named on purpose: read, or failed with the parser's reason
            continue
        for found in sorted(p for p in path.rglob("*") if p.is_file()):
            hidden = any(part.startswith(".") for part in found.relative_to(path).parts)
            if hidden:
                skipped.append(Outcome(found, "skipped", "hidden (a name starting with '.')"))
            elif found.suffix.lower().lstrip(".") not in SUPPORTED:
                skipped.append(Outcome(found, "skipped", f"not a type Ragline reads ({', '.join(SUPPORTED)})"))
            else:
                files.append(found)
    if not files:
        raise RetrievalError("no files to ingest: " + (skipped[0].detail if skipped else "the folders are empty"))
    return files, skipped


async def ingest_paths(args: argparse.Namespace, services: Services) -> int:
    """The command's work; exit code 1 when a file failed (the others are stored)."""
    from ragline.retrieval.types import KnowledgeBaseType

    kb = services.find_knowledge_base(args.kb, args.tenant)  # a wrong name fails before the stores open
    files, skipped = collect(args.paths)
    faq = kb.type == KnowledgeBaseType.FAQ
    tally = Tally(list(skipped), unit="FAQ entries" if faq else "chunk(s)")
    live = on_terminal()
    bar = ProgressBar("", live=live)
    await asyncio.to_thread(lambda: services.retrieval)  # opens the stores and the embedder: off the event loop
    current: Path | None = None
    service = services.ingestion
    listener, service.on_change = service.on_change, None  # the wiki rebuilds once, after the last file
    try:
        for number, path in enumerate(files, start=1):
            current = path
            label = f"[{number}/{len(files)}] {_short(path)}"
            if not live:
                bar.line(label)
            outcome = await (_import_faq(args, services, kb, path, bar, label) if faq else _ingest_one(services, kb, args.tenant, path, bar, label))
            tally.outcomes.append(outcome)
            if outcome.status == "failed" or live:
                bar.line(f"{label}: {_result(outcome)}")
        current = None
    except asyncio.CancelledError:
        bar.close()
        print(tally.summary(kb.name))
        if current is not None:
            print(f"interrupted: {current} was not stored; the same command continues (unchanged files are not embedded again)")
        raise
    finally:
        bar.close()
        service.on_change = listener
    print(tally.summary(kb.name))
    changed = [o.knowledge for o in tally.of("ingested") if o.knowledge is not None]
    if changed and listener is not None:
        await listener(services.find_knowledge_base(kb.id, args.tenant), changed)
    return FAILED if tally.of("failed") else 0


async def _ingest_one(services: Services, kb: KnowledgeBase, tenant: str, path: Path, bar: ProgressBar, label: str) -> Outcome:
    from ragline.ingestion.parsers import parse_file
    from ragline.ingestion.service import TextDocument
    from ragline.models.embeddings import EmbeddingError

    bar.update(0, 1, f"{label}: parsing")
    try:
        parsed = await asyncio.to_thread(parse_file, path)  # a large PDF parses for seconds: off the event loop
        doc = TextDocument.parsed(parsed, parsed.title or path.stem, str(path.resolve()))
        before = services.retrieval.catalog.find_knowledge(kb.id, doc.source)
        stored = await services.ingestion.ingest_documents(
            kb.id, [doc], tenant, progress=lambda done, total: bar.update(done, total, f"{label}: embedding"))
    except RetrievalError as exc:
        if isinstance(exc.__cause__, EmbeddingError):
            raise  # the model is down, not the file bad: every other file would fail the same way
        return Outcome(path, "failed", str(exc))
    except (OSError, ValueError) as exc:
        return Outcome(path, "failed", str(exc))
    knowledge = stored[0]
    unchanged = before is not None and before.content_hash == knowledge.content_hash
    return Outcome(path, "unchanged" if unchanged else "ingested", chunks=knowledge.chunk_count, knowledge=knowledge)


async def _import_faq(args: argparse.Namespace, services: Services, kb: KnowledgeBase, path: Path,
                      bar: ProgressBar, label: str) -> Outcome:
    from ragline.ingestion.faq_import import import_faq_file

    try:
        report = await import_faq_file(services.ingestion, kb.id, path, args.tenant, dry_run=args.dry_run,
                                       progress=lambda done, total: bar.update(done, total, f"{label}: embedding"))
    except (RetrievalError, OSError, ValueError) as exc:
        return Outcome(path, "failed", str(exc))
    bar.line(report.summary(path.name))
    return Outcome(path, "ingested", chunks=report.accepted)


def _short(path: Path, width: int = 40) -> str:
    text = str(path)
    return text if len(text) <= width else "…" + text[-(width - 1):]


def _result(outcome: Outcome) -> str:
    if outcome.status == "failed":
        return f"failed: {outcome.detail}"
    if outcome.status == "unchanged":
        return "unchanged"
    return f"{outcome.chunks:,} chunk(s)"
