"""into_chat_message: assemble the user message from the question and the contexts
(seed: PluginIntoChatMessage, into_chat_message.go).

The question is checked for prompt-injection phrasing (flagged, never dropped); contexts are
numbered, with image information as Markdown and a header of the documents they come from; with
FAQ priority, FAQ answers form a high-priority section and a strong FAQ match is marked exact.
The context template is rendered even with no contexts, so the current time still reaches the
model. The rendered message is stored on the user message for audit.
"""

from __future__ import annotations

import re
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.runtime import Runtime

from ragline import prompts
from ragline.graph.context import RunContext
from ragline.graph.request import PipelineRequest
from ragline.graph.state import PipelineState
from ragline.nodes._generation import placeholder_values
from ragline.retrieval.types import ChunkType, SearchResult

_INJECTION = [
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"\bignore\s+(all\s+|any\s+|the\s+)?(previous|prior|above|earlier)\s+(instructions|prompts|rules)",
        r"\bdisregard\s+(all\s+|any\s+|the\s+)?(previous|prior|above|system)\b",
        r"\b(reveal|print|show|repeat)\s+(your|the)\s+(system\s+prompt|instructions)",
        r"\byou\s+are\s+now\s+(?:a|an|in)\b",
        r"忽略(之前|以上|上面|前面)的?(所有)?(指令|指示|提示)",
        r"(输出|显示|告诉我)(你的)?系统提示",
    )
]


def injection_flags(text: str) -> list[str]:
    """ValidateInput: the suspicious phrases found (the question is still answered)."""
    return [match.group(0) for pattern in _INJECTION if (match := pattern.search(text or ""))]


def _passage(result: SearchResult) -> str:
    """getEnrichedPassageForChat: content plus its images as Markdown with their descriptions."""
    lines = [result.content.strip()]
    for image in result.metadata.get("images", []) or []:
        if isinstance(image, dict) and image.get("url"):
            caption = str(image.get("caption") or "").strip()
            lines.append(f"![{caption}]({image['url']})" + (f"\n{caption}" if caption else ""))
    return "\n".join(lines)


def pre_boost_score(result: SearchResult) -> float:
    """The score before FAQ/wiki/memory boosts: boosts must not fake an exact FAQ match."""
    return float(result.metadata.get("composite_score", result.score))


def document_header(results: list[SearchResult]) -> str:
    """buildDocumentHeader: each source document once, with its description when known."""
    lines, seen = [], set()
    for result in results:
        title = result.knowledge_title or result.metadata.get("title") or ""
        if not title or title in seen:
            continue
        seen.add(title)
        description = str(result.metadata.get("description") or "").strip()
        lines.append(f"- {title}" + (f": {description}" if description else ""))
    return "Documents:\n" + "\n".join(lines) if lines else ""


def _numbered(results: list[SearchResult], start: int, exact_threshold: float | None = None) -> list[str]:
    blocks = []
    for offset, result in enumerate(results):
        exact = exact_threshold is not None and pre_boost_score(result) >= exact_threshold
        attributes = f'id="{start + offset}"' + (' match="exact"' if exact else "")
        blocks.append(f"<context {attributes}>\n{_passage(result)}\n</context>")
    return blocks


def render_contexts(results: list[SearchResult], request: PipelineRequest) -> str:
    if not results:
        return ""
    header = document_header(results)
    if request.faq_priority_enabled:
        faq = [r for r in results if r.chunk_type == ChunkType.FAQ]
        documents = [r for r in results if r.chunk_type != ChunkType.FAQ]
        sections = []
        if faq:
            body = "\n".join(_numbered(faq, 1, request.faq_direct_answer_threshold))
            sections.append(f'<source type="faq" priority="high">\n{body}\n</source>')
        if documents:
            body = "\n".join(_numbered(documents, len(faq) + 1))
            sections.append(f'<source type="document" priority="supplementary">\n{body}\n</source>')
        body = "\n".join(sections)
    else:
        body = "\n".join(_numbered(results, 1))
    return f"{header}\n\n{body}" if header else body


def _audited_user_message(state: PipelineState, rendered: str, flags: list[str]) -> list[HumanMessage]:
    turn = state["turn"]
    original = next((m for m in state.get("messages", []) if m.id == turn.user_message_id), None)
    if original is None:
        return []
    extra = {**original.additional_kwargs, "rendered_content": rendered}
    if flags:
        extra["injection_flags"] = flags
    return [HumanMessage(content=original.content, id=original.id, additional_kwargs=extra)]  # same id: replaced


async def into_chat_message(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Render the context template with the merged results into `user_content`."""
    request = state["request"]
    results = list(state.get("merge_results", []))
    contexts = render_contexts(results, request)
    template = request.summary.context_template or prompts.get("context_template").text()
    values = {**placeholder_values(state), "query": request.query, "contexts": contexts or "(no retrieved contexts)"}
    user_content = prompts.render(template, **values)
    flags = injection_flags(request.query)
    return {
        "user_content": user_content,
        "rendered_contexts": contexts,
        "messages": _audited_user_message(state, user_content, flags),
    }
