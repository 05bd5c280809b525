"""Retrieved contexts as the model sees them, and citations back (seed: chat_pipeline/references.go).

One `Registry` per answer. `into_chat_message` renders the contexts through it (aliases cN, wN,
dN, bN; FAQ priority; exact matches), the only rendering there is; the generation stage builds
the same registry again from the same results in the same order, so the aliases the model reads
are the ones its ref tags are decoded with, whether the answer streams or not.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import convert_to_messages, convert_to_openai_messages

from ragline.citations import Registry, SourceChunk
from ragline.contracts.request import PipelineRequest
from ragline.ingestion.instructions import without_instructions
from ragline.models.chat import Message


def _passage(data: dict[str, Any]) -> str:
    """getEnrichedPassageForChat: content plus its images as Markdown with their descriptions. A
    sentence that speaks to the assistant is left out: the model must not obey a passage, and no
    answer sentence may be attributed to such a sentence (ingestion/instructions.py)."""
    lines = [without_instructions(str(data.get("content", "")).strip())]
    for image in (data.get("metadata") or {}).get("images", []) or []:
        if isinstance(image, dict) and image.get("url"):
            caption = str(image.get("caption") or "").strip()
            lines.append(f"![{caption}]({image['url']})" + (f"\n{caption}" if caption else ""))
    return "\n".join(lines)


def source_chunks(results: list[Any]) -> list[SourceChunk]:
    """Merged search results as the citations package takes them."""
    chunks = []
    for result in results:
        data = result.model_dump(mode="json") if hasattr(result, "model_dump") else dict(result)
        metadata = data.get("metadata") or {}
        chunks.append(
            SourceChunk(
                chunk_id=data["id"],
                content=_passage(data),
                knowledge_id=data.get("knowledge_id", ""),
                knowledge_base_id=data.get("knowledge_base_id", ""),
                title=data.get("knowledge_title") or metadata.get("title", ""),
                score=float(data.get("score", 0.0)),
                base_score=metadata.get("composite_score"),
                chunk_index=int(data.get("chunk_index", 0)),
                chunk_type=str(data.get("chunk_type", "text")),
                match_type=str(metadata.get("match_type") or data.get("match_type", "")),
                source="web_search" if metadata.get("source") == "web_search" else "knowledge_base",
                url=str(metadata.get("url", "")),
                metadata=metadata,
            )
        )
    return chunks


def answer_registry(request: PipelineRequest, sources: list[SourceChunk], *, compact_protocol: bool = False) -> Registry:
    """The answer's registry with the contexts registered exactly as they were rendered."""
    registry = Registry(citations_enabled=request.citations_enabled, compact_protocol=compact_protocol)
    registry.register_context(sources, faq_priority=request.faq_priority_enabled)
    return registry


def render_contexts(request: PipelineRequest, sources: list[SourceChunk], *, plain: bool = False) -> str:
    """The contexts under their aliases (`<search_results>` / `<web_search_results>`), or as plain
    passages for a small local model; "" for none."""
    if not sources:
        return ""
    registry = Registry(citations_enabled=request.citations_enabled, compact_protocol=plain)
    return registry.render_context(
        sources, faq_priority=request.faq_priority_enabled, faq_direct_answer_threshold=request.faq_direct_answer_threshold
    )


def cited_messages(registry: Registry, messages: list[Message]) -> list[Message]:
    """The protocol appended to the system prompt and every message encoded (known ids aliased)."""
    return convert_to_openai_messages(registry.prepare_messages(convert_to_messages(messages)))
