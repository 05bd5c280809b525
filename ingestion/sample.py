"""The bundled sample knowledge base (a fictional weather station), created and ingested on demand.

Idempotent: documents whose text did not change are skipped, and their vectors come from the
embedding cache, so calling it on every start costs a few milliseconds after the first run. Each
file is known by its name under `sample_kb/`, not by where the package is installed, so a second
checkout or virtual environment sharing the data directory updates the same documents instead of
adding copies (which would fill every answer's context with duplicates).
"""

from __future__ import annotations

from pathlib import Path

from ragline.contracts.access import Principal
from ragline.ingestion.parsers import parse_file
from ragline.ingestion.service import IngestionService, Progress, TextDocument
from ragline.retrieval.errors import KnowledgeBaseNotFoundError
from ragline.retrieval.stack import RetrievalStack
from ragline.retrieval.types import KnowledgeBase

SAMPLE_KB_NAME = "sample"
SAMPLE_SOURCE_PREFIX = "sample_kb/"
SAMPLE_DIR = Path(__file__).resolve().parent.parent / "ragline" / "sample_kb"


def sample_files() -> list[Path]:
    import ragline

    folder = Path(ragline.__file__).resolve().parent / "sample_kb"
    folder = folder if folder.is_dir() else SAMPLE_DIR
    return sorted(p for p in folder.iterdir() if p.suffix in (".md", ".txt"))


async def ensure_sample_kb(stack: RetrievalStack, tenant_id: str = "default",
                           progress: Progress | None = None) -> KnowledgeBase:
    """Create the `sample` knowledge base if missing and (re-)ingest any changed sample file."""
    try:
        kb = stack.knowledge_bases.get_by_name(SAMPLE_KB_NAME, Principal.operator_of(tenant_id))
    except KnowledgeBaseNotFoundError:
        kb = stack.knowledge_bases.create(SAMPLE_KB_NAME, tenant_id=tenant_id, tags=["sample"],
                                          description="Aurora Home Weather Station manual (fictional product)")
    ingestion = IngestionService(stack)
    docs = [sample_document(path) for path in sample_files()]
    await ingestion.ingest_documents(kb.id, docs, tenant_id, progress)
    current = {doc.source for doc in docs}
    for stale in [k for k in stack.catalog.list_knowledge(kb.id) if k.source not in current]:
        await ingestion.delete_knowledge(kb.id, stale.id, tenant_id)  # renamed, removed, or another checkout's path
    return kb


def sample_document(path: Path) -> TextDocument:
    parsed = parse_file(path)
    return TextDocument.parsed(parsed, parsed.title or path.stem, f"{SAMPLE_SOURCE_PREFIX}{path.name}")
