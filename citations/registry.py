"""The one per-answer boundary between durable identities and the model's short handles.

Replaces the seed's `modelcontext.Registry` (internal/modelcontext/registry.go) and the
generation side of `prepareMessagesWithModelContext` (chat_pipeline/references.go).

Create one Registry per answer, spanning every model call of that answer; never persist it or
share it between requests. Its lifecycle:

1. `render_context` where the contexts enter the prompt (the only rendering of them), or
   `register_context` to give a registry rebuilt for the same answer the same aliases; then
   `prepare_messages` right before the model call: protocol appended, resource handles and
   known ids aliased.
2. `stream_decoder()` once per streamed channel (answer, thinking), or `decode_message` /
   `expand_text` for a complete response.
3. `decode_tool_calls` before any tool runs.

The codec order is fixed here and nowhere else: resource handles are aliased before source ids,
so a wiki slug `summary/<knowledge-id>` becomes one res:// alias instead of `summary/d1`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast
from urllib.parse import urlsplit

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
)

from ragline.citations.messages import (
    map_message_text,
    map_strings,
)
from ragline.citations.protocol import append_protocol, protocol_prompt
from ragline.citations.render import (
    ChunkView,
    PageView,
    order_by_faq_priority,
    render_sections,
)
from ragline.citations.resources import ResourceTable
from ragline.citations.sources import (
    ALIAS_SHAPE,
    DEFAULT_CHUNK_TYPE,
    ChunkRef,
    SourceChunk,
    SourceKind,
    SourceTable,
)
from ragline.citations.stream_decoder import StreamDecoder, decode
from ragline.citations.tags import compact_public_tags, kb_tag, ref_aliases, web_tag

# Tool-argument keys whose alias-shaped values are source handles (the seed's sourceKeySpaces).
# Only these keys are decoded: "c1" in a free-text argument is left alone.
SOURCE_ARGUMENT_KEYS: Mapping[str, SourceKind] = {
    "chunk_id": "chunk",
    "chunk_ids": "chunk",
    "knowledge_id": "document",
    "knowledge_ids": "document",
    "document_id": "document",
    "document_ids": "document",
    "knowledge_base_id": "knowledge_base",
    "knowledge_base_ids": "knowledge_base",
    "kb_id": "knowledge_base",
    "kb_ids": "knowledge_base",
    "url": "web",
    "urls": "web",
}


class Registry:
    """Answer-local aliases (cN wN dN bN res://NNNN), the protocol, and the output decoder."""

    def __init__(self, *, citations_enabled: bool = True, compact_protocol: bool = False) -> None:
        self._citations_enabled = citations_enabled
        self._compact_protocol = compact_protocol  # plain passages, no citation rules: small local models
        self._sources = SourceTable()
        self._resources = ResourceTable()

    @property
    def citations_enabled(self) -> bool:
        return self._citations_enabled

    @property
    def sources(self) -> SourceTable:
        return self._sources

    @property
    def resources(self) -> ResourceTable:
        return self._resources

    # --- protocol ---------------------------------------------------------------------------

    def protocol_prompt(self) -> str:
        return protocol_prompt(self._citations_enabled, compact=self._compact_protocol)

    def append_protocol(self, system_prompt: str) -> str:
        return append_protocol(system_prompt, self._citations_enabled, compact=self._compact_protocol)

    # --- registration and the model's view of results --------------------------------------------

    def register_search_results(self, results: Iterable[SourceChunk], *, faq_priority: bool = False) -> list[str]:
        """Register results as citable evidence in FAQ-priority order; their aliases, same order."""
        return [self._sources.register_result(r) for r in order_by_faq_priority(results, faq_priority)]

    def register_chunk(self, ref: ChunkRef, *, evidence: bool = True) -> str:
        return self._sources.register_chunk(ref, evidence=evidence)

    def register_web(self, url: str, title: str = "", *, evidence: bool = True) -> str:
        return self._sources.register_web(url, title, evidence=evidence)

    def register_context(self, results: Iterable[SourceChunk], *, faq_priority: bool = False) -> list[tuple[SourceChunk, str]]:
        """Register `results` as `render_context` does, in the same order, without rendering.

        A later model call of the same answer (or a registry rebuilt for it) gets the aliases the
        rendered contexts used: each result, then its document and knowledge base.
        """
        registered: list[tuple[SourceChunk, str]] = []
        for result in order_by_faq_priority(results, faq_priority):
            alias = self._sources.register_result(result)
            if not alias:
                continue
            if not result.is_web:
                self._sources.register_document(result.knowledge_id)
                self._sources.register_knowledge_base(result.knowledge_base_id)
            registered.append((result, alias))
        return registered

    def render_context(
        self,
        results: Iterable[SourceChunk],
        *,
        faq_priority: bool = False,
        faq_direct_answer_threshold: float | None = None,
    ) -> str:
        """Register `results` and render them as `<search_results>` / `<web_search_results>`."""
        chunks: list[ChunkView] = []
        pages: list[PageView] = []
        for result, alias in self.register_context(results, faq_priority=faq_priority):
            if result.is_web:
                domain = urlsplit(result.page_url).hostname or ""
                pages.append(PageView(alias, self.encode_text(result.content), self.encode_text(result.title), domain))
                continue
            chunks.append(self._chunk_view(alias, result, faq_priority, faq_direct_answer_threshold))
        return render_sections(chunks, pages, plain=self._compact_protocol)

    def _chunk_view(self, alias: str, result: SourceChunk, faq_priority: bool, threshold: float | None) -> ChunkView:
        score = result.base_score if result.base_score is not None else result.score
        priority = ("high" if result.is_faq else "supplementary") if faq_priority else ""
        return ChunkView(
            alias=alias,
            content=self.encode_text(result.content),
            title=self.encode_text(result.title),
            document_alias=self._sources.register_document(result.knowledge_id),
            knowledge_base_alias=self._sources.register_knowledge_base(result.knowledge_base_id),
            # "text" is the default kind; naming it on every result only costs tokens.
            chunk_type="" if result.chunk_type == DEFAULT_CHUNK_TYPE else result.chunk_type,
            priority=priority,
            exact_match=faq_priority and result.is_faq and threshold is not None and score >= threshold,
        )

    # --- model-bound text -----------------------------------------------------------------------

    def encode_text(self, text: str) -> str:
        """Resource handles first, then known source ids (the fixed order)."""
        return self._sources.compact_known_ids(self._resources.encode_text(text))

    def encode_messages(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        """Model-facing copies of `messages`; the originals are left as they are.

        Two passes, as in the seed: replayed kb/web tags of every assistant and tool message are
        folded into refs first (registering those sources as navigation only), so that known ids
        are compacted in all messages whichever message introduced them.
        """
        folded = [map_message_text(m, self._resources.encode_text) for m in messages]
        folded = [
            map_message_text(m, self._fold_public_tags) if isinstance(m, AIMessage | ToolMessage) else m for m in folded
        ]
        encoded = []
        for message in folded:
            message = map_message_text(message, self._sources.compact_known_ids)
            if isinstance(message, AIMessage) and message.tool_calls:
                calls = [
                    ToolCall(**{**c, "args": map_strings(c["args"], self._encode_argument)}) for c in message.tool_calls
                ]
                message = message.model_copy(update={"tool_calls": calls})
            encoded.append(message)
        return encoded

    def prepare_messages(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        """The messages to send: the protocol appended to the system prompt, everything encoded.

        The contexts are already in the messages, rendered by `render_context` of this registry
        (or of one that registered the same results with `register_context`).
        """
        prepared = list(messages)
        first = prepared[0] if prepared else None
        if isinstance(first, SystemMessage):
            prepared[0] = first.model_copy(update={"content": self._with_protocol(first.content)})
        else:
            prepared.insert(0, SystemMessage(content=self.protocol_prompt().lstrip()))
        return self.encode_messages(prepared)

    def _with_protocol(self, content: str | list[Any]) -> str | list[Any]:
        if isinstance(content, str):
            return self.append_protocol(content)
        return [*content, {"type": "text", "text": self.protocol_prompt()}]

    def _encode_argument(self, value: str, _key: str | None) -> str:
        return self.encode_text(value)

    def _fold_public_tags(self, text: str) -> str:
        return compact_public_tags(
            text,
            lambda ref: self._sources.register_chunk(ref, evidence=False),
            lambda url, title: self._sources.register_web(url, title, evidence=False),
        )

    # --- model output -----------------------------------------------------------------------------

    def expand_text(self, text: str) -> str:
        """Decode a complete text: ref tags expanded, res:// aliases restored, unknowns removed."""
        return decode(text, self._expand_token, final=True)[0]

    def stream_decoder(self) -> StreamDecoder:
        """A fresh decoder for one streamed channel; the answer and thinking each need their own."""
        return StreamDecoder(self._expand_token)

    def decode_message(self, message: AIMessage) -> AIMessage:
        """A non-streamed response decoded in one call: content, reasoning and tool calls."""
        decoded = cast(AIMessage, map_message_text(message, self.expand_text))
        if decoded.tool_calls:
            decoded = decoded.model_copy(update={"tool_calls": self.decode_tool_calls(decoded.tool_calls)})
        return decoded

    def _expand_token(self, match: re.Match[str]) -> str:
        resource = match.group("res")
        if resource is not None:
            return self._resources.restore(resource) or ""
        is_complete_ref = (
            match.group("name").lower() == "ref" and not match.group("close") and match.group("end") == ">"
        )
        if not (is_complete_ref and self._citations_enabled):
            return ""
        return "".join(self._public_tag(alias) for alias in ref_aliases(match.group("body")))

    def _public_tag(self, alias: str, *, attributed: bool = False) -> str:
        chunk = self._sources.citable_chunk(alias)
        if chunk is not None:
            return kb_tag(chunk, attributed=attributed)
        web = self._sources.citable_web(alias)
        return web_tag(web, attributed=attributed) if web is not None else ""

    # --- attribution (citations Ragline matched, for answers whose model wrote none) ----------------

    def citable_alias(self, result: SourceChunk) -> str:
        """The alias `result` was given to the model under as evidence in this answer; "" otherwise."""
        return self._sources.citable_alias(result)

    def attributed_tag(self, alias: str) -> str:
        """The public tag of a citable source, marked `attributed="true"`; "" for any other alias
        and when citations are off. The same gate as a model's ref: only this answer's evidence."""
        return self._public_tag(alias, attributed=True) if self._citations_enabled else ""

    # --- tool calls ---------------------------------------------------------------------------------

    def decode_tool_arguments(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Real values for res:// aliases anywhere and for source aliases under declared keys."""
        return dict(map_strings(dict(args), self._decode_argument))

    def decode_tool_calls(self, tool_calls: Sequence[ToolCall]) -> list[ToolCall]:
        return [ToolCall(**{**call, "args": self.decode_tool_arguments(call["args"])}) for call in tool_calls]

    def unresolved_handles(self, args: Mapping[str, Any]) -> list[str]:
        """Aliases left in decoded arguments that this answer never issued: reject such a call."""
        found: set[str] = set()

        def collect(value: str, key: str | None) -> str:
            found.update(self._resources.unknown_aliases(value))
            if key in SOURCE_ARGUMENT_KEYS and ALIAS_SHAPE.match(value.strip()):
                found.add(value.strip())
            return value

        map_strings(dict(args), collect)
        return sorted(found)

    def _decode_argument(self, value: str, key: str | None) -> str:
        value = self._resources.decode_known(value)
        kind = SOURCE_ARGUMENT_KEYS.get(key or "")
        if kind is not None and ALIAS_SHAPE.match(value.strip()):
            return self._sources.durable_for(value.strip(), kind) or value
        return value

