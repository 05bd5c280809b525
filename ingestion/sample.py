"""The bundled sample knowledge base (a fictional weather station), created and ingested on demand.

Idempotent: documents whose text did not change are skipped, and their vectors come from the
embedding cache, so calling it on every start costs a few milliseconds after the first run.
"""

from __future__ import annotations

from pathlib import Path

from ragline.ingestion.service import IngestionService, Progress
from ragline.retrieval.errors import KnowledgeBaseNotFoundError
from ragline.retrieval.stack import RetrievalStack
from ragline.retrieval.types import KnowledgeBase

SAMPLE_KB_NAME = "sample"
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
        kb = stack.knowledge_bases.get_by_name(SAMPLE_KB_NAME, tenant_id)
    except KnowledgeBaseNotFoundError:
        kb = stack.knowledge_bases.create(SAMPLE_KB_NAME, tenant_id=tenant_id, tags=["sample"],
                                          description="Aurora Home Weather Station manual (fictional product)")
    await IngestionService(stack).ingest_files(kb.id, sample_files(), tenant_id, progress)
    return kb
