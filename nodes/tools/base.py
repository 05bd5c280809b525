"""What every agent tool is: a name, an OpenAI function schema, and a coroutine that runs one call.

A tool gets the turn's `ToolContext` (the services, the tenant, the turn's knowledge bases and the
answer's one citation `Registry`, rebuilt for the turn from every passage given so far) and returns
a `ToolOutcome`: the text the model reads, a short summary for the tool_result event, and the
passages it registered (so later rounds, and the answer, keep their aliases). A tool that cannot do
what it was asked raises: the agent answers the call with the error and the loop goes on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ragline import defaults
from ragline.citations import Registry, SourceChunk
from ragline.contracts.access import Principal
from ragline.contracts.passages import SearchResult
from ragline.generation.citing import source_chunks
from ragline.retrieval.passages import kb_ids_of
from ragline.retrieval.types import Knowledge


@dataclass(frozen=True)
class ToolContext:
    services: Any  # ragline.services.Services
    tenant_id: str
    knowledge_bases: tuple[str, ...]  # the turn's, as ids or names
    registry: Registry
    user_id: str = ""  # whose tokens a server needing the user's authorization (MCP OAuth) is reached with
    groups: tuple[str, ...] = ()  # the user's groups: what restricted documents it may read
    key_knowledge_bases: tuple[str, ...] | None = None  # a scoped key's bases

    @property
    def who(self) -> Principal:
        scope = frozenset(self.key_knowledge_bases) if self.key_knowledge_bases is not None else None
        return Principal(self.tenant_id, self.user_id, frozenset(self.groups), scope)


@dataclass(frozen=True)
class ToolOutcome:
    content: str  # what the model reads as the tool's result
    summary: str  # the tool_result event's output
    sources: list[SourceChunk] = field(default_factory=list)  # passages given to the model, registered in this order
    images: list[dict[str, str]] = field(default_factory=list)  # {"chunk_id", "url"} of the images these passages hold (identities, no bytes)


@dataclass(frozen=True)
class AgentTool:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments
    run: Callable[[dict[str, Any], ToolContext], Awaitable[ToolOutcome]]

    def schema(self) -> dict[str, Any]:
        """The tool as the model is offered it (an OpenAI function schema)."""
        return {"type": "function", "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


def passage_summary(registry: Registry, sources: list[SourceChunk]) -> str:
    """`3 passages: c1 Title, c2 Title, ...` for the tool_result event."""
    if not sources:
        return "no passages"
    named = ", ".join(f"{registry.citable_alias(s)} {s.title}".strip() for s in sources)
    return f"{len(sources)} passage{'s' if len(sources) != 1 else ''}: {named}"[: defaults.AGENT_RESULT_SUMMARY_CHARS]


def passages_outcome(context: ToolContext, results: list[SearchResult], nothing: str = "") -> ToolOutcome:
    """The results as passages the model reads, registered in the answer's registry; `nothing` is
    what the model reads when there are none."""
    sources = source_chunks(results)
    rendered = context.registry.render_context(sources)
    return ToolOutcome(rendered if sources or not nothing else nothing, passage_summary(context.registry, sources), sources)


def turn_document(context: ToolContext, document_id: str) -> Knowledge:
    """The tenant's document in the turn's knowledge bases; any other is reported as not found.
    Blocking (catalog reads): call it in a worker thread."""
    stack = context.services.retrieval
    knowledge = stack.knowledge_bases.readable_document(document_id, context.who)
    allowed = kb_ids_of(stack, context.knowledge_bases, context.who) if context.knowledge_bases else []
    if knowledge is None or knowledge.tenant_id != context.tenant_id or (allowed and knowledge.knowledge_base_id not in allowed):
        raise LookupError(f"no document {document_id!r} in this turn's knowledge bases")
    return knowledge
