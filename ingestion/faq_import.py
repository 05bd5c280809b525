"""FAQ entries: standard question, similar and negative questions, answers; import from CSV/JSON.

Replaces the seed's FAQ knowledge handling (faq entry upsert, batch import with dry run). Each
entry is one chunk; its standard and similar questions are embedded (alone, or with the answer
in question_answer mode) as separate vectors of that chunk. Negative questions are stored in the
chunk's metadata for filtering and never indexed.
"""

from __future__ import annotations

import csv
import io
import json
import re
import uuid
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator

from ragline import defaults
from ragline.contracts.passages import ChunkType
from ragline.ingestion.parsers import decode_text
from ragline.ingestion.service import IngestionService, PreparedDocument, Progress
from ragline.retrieval.catalog import ChunkRecord
from ragline.retrieval.errors import IngestionError
from ragline.retrieval.faq import normalize_question
from ragline.retrieval.types import FAQIndexMode, Knowledge, KnowledgeBase, KnowledgeBaseType

_LIST_SPLIT = re.compile(r"\s*(?:\n|\|\||\|)\s*")
_ALIASES = {
    "question": "standard_question", "standard question": "standard_question", "标准问题": "standard_question",
    "问题": "standard_question", "similar": "similar_questions", "相似问题": "similar_questions",
    "negative": "negative_questions", "反例问题": "negative_questions", "answer": "answers", "答案": "answers",
}


class FAQEntry(BaseModel):
    standard_question: str = Field(min_length=1)
    similar_questions: list[str] = Field(default_factory=list)
    negative_questions: list[str] = Field(default_factory=list)
    answers: list[str] = Field(min_length=1)
    tags: list[str] = Field(default_factory=list)

    @field_validator("similar_questions", "negative_questions", "answers", "tags", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):  # CSV cells hold lists separated by | or newlines
            return [v for v in _LIST_SPLIT.split(value.strip()) if v]
        return [str(v).strip() for v in value if str(v).strip()] if isinstance(value, list) else value

    @field_validator("standard_question")
    @classmethod
    def _strip(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("standard question is empty")
        return value.strip()

    def questions(self) -> list[str]:
        return list(dict.fromkeys([self.standard_question, *self.similar_questions]))

    def answer_text(self) -> str:
        return "\n".join(self.answers)


class RejectedRow(BaseModel):
    row: int  # 1-based data row (CSV header not counted) or list index + 1
    reason: str


class FAQImportReport(BaseModel):
    dry_run: bool
    accepted: int = 0
    imported: int = 0
    rejected: list[RejectedRow] = Field(default_factory=list)

    def summary(self, name: str = "") -> str:
        verb = "would import" if self.dry_run else "imported"
        head = f"{name}: " if name else ""
        lines = [f"{head}{verb} {self.accepted} FAQ entr{'y' if self.accepted == 1 else 'ies'}, rejected {len(self.rejected)}"]
        lines += [f"  row {r.row}: {r.reason}" for r in self.rejected]
        return "\n".join(lines)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    return f"{where}: {err['msg']}" if where else err["msg"]


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Raw rows of a CSV (header names, with a few aliases) or a JSON list of objects."""
    text = decode_text(path.read_bytes())
    kind = path.suffix.lower().lstrip(".")
    if kind == "json":
        data = json.loads(text)
        rows = data.get("entries", data) if isinstance(data, dict) else data
        if not isinstance(rows, list):
            raise IngestionError(f"{path.name}: expected a list of FAQ objects")
        return [r if isinstance(r, dict) else {"_invalid": r} for r in rows]
    if kind == "csv":
        reader = csv.DictReader(io.StringIO(text))
        return [{_ALIASES.get((k or "").strip().lower(), (k or "").strip().lower()): v for k, v in row.items()}
                for row in reader]
    raise IngestionError(f"{path.name}: FAQ import reads .csv or .json files")


def validate_rows(rows: list[dict[str, Any]]) -> tuple[list[FAQEntry], list[RejectedRow]]:
    """Entries that pass, and a reason for each row that does not (duplicates included)."""
    entries: list[FAQEntry] = []
    rejected: list[RejectedRow] = []
    seen: set[str] = set()
    for i, row in enumerate(rows, start=1):
        if "_invalid" in row:
            rejected.append(RejectedRow(row=i, reason="not an object"))
            continue
        try:
            entry = FAQEntry.model_validate({k: v for k, v in row.items() if v not in (None, "")})
        except ValidationError as exc:
            rejected.append(RejectedRow(row=i, reason=_first_error(exc)))
            continue
        key = normalize_question(entry.standard_question)
        clash = {normalize_question(q) for q in entry.questions()} & {normalize_question(q) for q in entry.negative_questions}
        if key in seen:
            rejected.append(RejectedRow(row=i, reason=f"duplicate standard question: {entry.standard_question}"))
        elif clash:
            rejected.append(RejectedRow(row=i, reason="a negative question repeats one of the entry's questions"))
        else:
            seen.add(key)
            entries.append(entry)
    return entries, rejected


def _prepare(kb: KnowledgeBase, entry: FAQEntry, existing: Knowledge | None, tenant_id: str) -> PreparedDocument:
    source = f"faq:{normalize_question(entry.standard_question)}"
    knowledge = Knowledge(id=existing.id if existing else uuid.uuid4().hex, knowledge_base_id=kb.id, tenant_id=tenant_id,
                          title=entry.standard_question, source=source, file_type="faq",
                          content_hash=entry.model_dump_json(), metadata={"tags": entry.tags})
    content = f"Q: {entry.standard_question}\nA: {entry.answer_text()}"
    chunk = ChunkRecord(uuid.uuid4().hex, kb.id, knowledge.id, 0, content, ChunkType.FAQ,
                        metadata={**entry.model_dump(), "title": entry.standard_question})
    with_answer = kb.faq_index_mode == FAQIndexMode.QUESTION_ANSWER
    texts = [(f"{chunk.id}:{i}", chunk.id, f"{q}\n{entry.answer_text()}" if with_answer else q)
             for i, q in enumerate(entry.questions())]
    return PreparedDocument(knowledge, [chunk], texts, entry.model_dump_json())


async def upsert_faq(service: IngestionService, kb_id: str, entries: list[FAQEntry], tenant_id: str = "default",
                     progress: Progress | None = None) -> list[Knowledge]:
    """Add or replace FAQ entries (keyed by the normalised standard question)."""
    kb = service._kb(kb_id, tenant_id)
    if kb.type != KnowledgeBaseType.FAQ:
        raise IngestionError(f"knowledge base {kb.name} is not an FAQ knowledge base")
    prepared = []
    for entry in entries:
        existing = service.catalog.find_knowledge(kb.id, f"faq:{normalize_question(entry.standard_question)}")
        if existing is None or existing.content_hash != entry.model_dump_json():
            prepared.append(_prepare(kb, entry, existing, tenant_id))
    # Stored a batch at a time: an import cut short (a timeout, a stop) keeps the batches it finished,
    # and the same import run again embeds only the rest (unchanged entries are skipped above).
    for start in range(0, len(prepared), defaults.FAQ_WRITE_BATCH):
        batch = prepared[start : start + defaults.FAQ_WRITE_BATCH]
        await service.write(kb, batch, _offset(progress, start, len(prepared)) if progress else None)
    if not prepared and progress:
        progress(1, 1)
    return [p.knowledge for p in prepared]


def _offset(progress: Progress, start: int, total: int) -> Progress:
    """A batch's progress as the whole import's: entries of earlier batches counted done."""
    def report(done: int, of: int) -> None:
        progress(start + round(done / max(of, 1) * min(defaults.FAQ_WRITE_BATCH, total - start)), total)
    return report


async def import_faq_file(service: IngestionService, kb_id: str, path: Path, tenant_id: str = "default",
                          dry_run: bool = False, progress: Progress | None = None) -> FAQImportReport:
    entries, rejected = validate_rows(read_rows(path))
    report = FAQImportReport(dry_run=dry_run, accepted=len(entries), rejected=rejected)
    if not dry_run and entries:
        report.imported = len(await upsert_faq(service, kb_id, entries, tenant_id, progress))
    return report
