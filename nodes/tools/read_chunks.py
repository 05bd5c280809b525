"""read_chunks: a document's chunks in order, by the document's handle (dN) or id, for the tenant only.

For when a passage search found the right document but not the whole answer: the model reads the
document page by page. The chunks are registered in the answer's citation registry like search
results (cited the same way). Another tenant's document, or one outside the turn's knowledge
bases, is reported as not found.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ragline import defaults
from ragline.citations import SourceChunk
from ragline.ingestion.instructions import without_instructions
from ragline.nodes.tools.base import AgentTool, ToolContext, ToolOutcome, passage_summary, turn_document


def _document_chunks(context: ToolContext, document_id: str) -> tuple[Any, list[Any]]:
    knowledge = turn_document(context, document_id)
    chunks = sorted((c for c in context.services.retrieval.catalog.chunks_of(document_id) if c.content.strip()), key=lambda c: c.chunk_index)
    return knowledge, chunks


async def read_chunks(arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
    document_id = arguments.get("document_id")
    if not isinstance(document_id, str) or not document_id.strip():
        raise ValueError("read_chunks needs a document_id (a dN handle from the search results)")
    offset = arguments.get("offset", 0)
    limit = arguments.get("limit", defaults.AGENT_READ_CHUNKS_MAX)
    if not isinstance(offset, int) or offset < 0 or not isinstance(limit, int) or limit < 1:
        raise ValueError("offset must be a whole number >= 0 and limit one >= 1")
    knowledge, chunks = await asyncio.to_thread(_document_chunks, context, document_id.strip())
    page = chunks[offset : offset + min(limit, defaults.AGENT_READ_CHUNKS_MAX)]
    # the content as every passage a model reads: without sentences that speak to the assistant
    sources = [SourceChunk(chunk_id=c.id, content=without_instructions(c.content), knowledge_id=c.knowledge_id, knowledge_base_id=c.knowledge_base_id,
                           title=knowledge.title, chunk_index=c.chunk_index, chunk_type=str(c.chunk_type.value)) for c in page]
    rendered = context.registry.render_context(sources)
    more = offset + len(page) < len(chunks)
    note = f"\n(chunks {offset + 1}-{offset + len(page)} of {len(chunks)}; read on with offset={offset + len(page)})" if more else ""
    content = (rendered + note) if sources else f"The document has no chunks at offset {offset} (it has {len(chunks)})."
    return ToolOutcome(content, passage_summary(context.registry, sources), sources)


READ_CHUNKS = AgentTool(
    name="read_chunks",
    description="Read a document's chunks in order, by its handle (dN, as the search results give it). Returns passages (cN) to cite.",
    parameters={"type": "object", "properties": {
        "document_id": {"type": "string", "description": "The document's dN handle."},
        "offset": {"type": "integer", "minimum": 0, "description": "First chunk to read (0 = the beginning)."},
        "limit": {"type": "integer", "minimum": 1, "maximum": defaults.AGENT_READ_CHUNKS_MAX, "description": "How many chunks."},
    }, "required": ["document_id"]},
    run=read_chunks,
)
