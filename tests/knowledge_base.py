"""A small real knowledge base (Chroma, bm25s, the local e5 embedder) made in the current data
directory, for tests that reach Ragline the way an embedding program does (Services.from_settings)."""

from __future__ import annotations

import asyncio
from typing import Any

from ragline.ingestion.service import IngestionService, TextDocument


def create_knowledge_base(services: Any, name: str, documents: dict[str, str]) -> Any:
    """The knowledge base `name` holding `documents` ({title: text}), indexed before this returns."""
    kb = services.retrieval.knowledge_bases.create(name)
    texts = [TextDocument(text=text, title=title) for title, text in documents.items()]
    asyncio.run(IngestionService(services.retrieval).ingest_documents(kb.id, texts))
    return kb
