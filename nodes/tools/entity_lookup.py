"""entity_lookup: what the entity graph knows of named entities, in the turn's knowledge bases, as a tool.

The seed's agent tool for the graph (search_entity.go, the pipeline's entity_search stage as a
call the model makes): nodes matched per knowledge base whose graph extraction is on, in parallel
(GraphStore.search). The model reads the matched entities and their relations as text, and the
chunks they were read from as passages registered in the answer's citation registry (cN), kept
only when their document still exists in one of the turn's bases (retrieval/entity_hits.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

from ragline import defaults
from ragline.entities.store import GraphUnavailableError
from ragline.entities.types import GraphMatch
from ragline.generation.citing import source_chunks
from ragline.nodes.tools.base import AgentTool, ToolContext, ToolOutcome, passage_summary
from ragline.retrieval.entity_hits import search_entity_graph
from ragline.retrieval.passages import kb_ids_of
from ragline.retrieval.scope import DocumentScope

NOTHING_KNOWN = "The entity graph knows none of these entities. Try another spelling, or search the knowledge bases."


def _names(value: Any) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValueError("entity_lookup needs entities: a list of names")
    if len(value) > defaults.AGENT_ENTITY_LOOKUP_MAX:
        raise ValueError(f"{len(value)} entities asked; look up at most {defaults.AGENT_ENTITY_LOOKUP_MAX} at once")
    return list(dict.fromkeys(" ".join(v.split())[: defaults.AGENT_ENTITY_NAME_CHARS] for v in value))


def facts(match: GraphMatch, documents: set[str]) -> str:
    """The matched entities and their relations as lines, of existing documents only, bounded."""
    lines = [f"- {n.name}" + (f" ({n.type})" if n.type else "") + (f": {n.description}" if n.description else "")
             for n in match.nodes if n.knowledge_id in documents]
    relations = [f"- {r.source} {r.relation} {r.target}".rstrip() + (f": {r.description}" if r.description else "")
                 for r in match.relations if r.knowledge_id in documents]
    text = "\n".join(["Entities:", *dict.fromkeys(lines)] + (["Relations:", *dict.fromkeys(relations)] if relations else []))
    limit = defaults.AGENT_ENTITY_FACTS_CHARS
    return text if len(text) <= limit else text[:limit] + f"\n(cut at {limit} characters)"


async def entity_lookup(arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
    names = _names(arguments.get("entities"))
    if not context.knowledge_bases:
        raise ValueError("this turn has no knowledge base to look entities up in")
    store, stack = context.services.graph_store, context.services.retrieval
    if store.unavailable_reason:
        raise GraphUnavailableError(store.unavailable_reason)
    kb_ids = await asyncio.to_thread(kb_ids_of, stack, context.knowledge_bases, context.who)
    enabled = await store.extraction_enabled(kb_ids)
    kb_ids = [kb_id for kb_id in kb_ids if kb_id in enabled]
    if not kb_ids:
        raise LookupError("none of this turn's knowledge bases has an entity graph (graph extraction is off)")
    scope = DocumentScope({kb_id: None for kb_id in kb_ids})
    match, results = await search_entity_graph(store, stack.catalog, scope, names, context.who)
    named = {n.knowledge_id for n in match.nodes} | {r.knowledge_id for r in match.relations}
    existing = set(await asyncio.to_thread(stack.catalog.get_knowledge_many, named))
    if not any(n.knowledge_id in existing for n in match.nodes):
        return ToolOutcome(NOTHING_KNOWN, "no entity found")
    sources = source_chunks(results)
    content = facts(match, existing) + ("\n\n" + context.registry.render_context(sources) if sources else "")
    return ToolOutcome(content, passage_summary(context.registry, sources), sources)


ENTITY_LOOKUP = AgentTool(
    name="entity_lookup",
    description="Look named entities (people, products, places...) up in the knowledge bases' entity graph. Returns what it "
                "knows of them and their relations, and the passages (cN) that say so, to cite.",
    parameters={"type": "object", "properties": {
        "entities": {"type": "array", "minItems": 1, "maxItems": defaults.AGENT_ENTITY_LOOKUP_MAX,
                     "items": {"type": "string", "maxLength": defaults.AGENT_ENTITY_NAME_CHARS}, "description": "The entities' names."},
    }, "required": ["entities"]},
    run=entity_lookup,
)
