"""LLM extraction with graph_extraction.yaml: a question's entities, a document's graph.

Replaces the seed's ExtractManager (ExtractEntity for questions in extract_entity.go, ExtractGraph
at ingestion). Structured output is asked for first (the local llama.cpp model is constrained to
the schema); servers that reject it get the same prompt without, and the reply is parsed
leniently (code fences, prose around the JSON, a bare list).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from pydantic import ValidationError

from ragline import defaults, prompts
from ragline.entities.store import GraphStore, normalize_document_graph
from ragline.entities.types import (
    ExtractedGraph,
    GraphNode,
    GraphRelation,
    normalize_name,
)
from ragline.models.chat import ChatClient, ChatModelError, ChatOptions, Message

log = logging.getLogger(__name__)

ENTITIES_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "query_entities",
        "schema": {
            "type": "object",
            "properties": {"entities": {"type": "array", "items": {"type": "string"}}},
            "required": ["entities"],
        },
    },
}

GRAPH_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "document_graph",
        "schema": {
            "type": "object",
            "properties": {
                "entities": {"type": "array", "items": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "type": {"type": "string"}, "description": {"type": "string"}},
                    "required": ["name"],
                }},
                "relationships": {"type": "array", "items": {
                    "type": "object",
                    "properties": {"source": {"type": "string"}, "target": {"type": "string"},
                                   "relation": {"type": "string"}, "description": {"type": "string"}},
                    "required": ["source", "target", "relation"],
                }},
            },
            "required": ["entities", "relationships"],
        },
    },
}

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


class ExtractionError(ValueError):
    """The model's reply held no usable JSON."""


def _json_value(text: str) -> Any:
    """The first JSON object or array in a reply, fenced or surrounded by prose."""
    fenced = _FENCE.search(text)
    candidate = fenced.group(1) if fenced else text
    decoder = json.JSONDecoder()
    for index, char in enumerate(candidate):
        if char in "[{":
            try:
                return decoder.raw_decode(candidate[index:])[0]
            except json.JSONDecodeError:
                continue
    raise ExtractionError(f"no JSON in the model's reply: {text[:200]!r}")


def parse_entities(text: str) -> list[str]:
    """{"entities": [...]} or a bare list; items may be strings or {"name": ...}; duplicates dropped."""
    value = _json_value(text)
    if isinstance(value, dict):
        value = value.get("entities", [])
    if not isinstance(value, list):
        raise ExtractionError("the entity list is not a list")
    names = [item.get("name", "") if isinstance(item, dict) else item for item in value]
    out: dict[str, str] = {}
    for name in names:
        if isinstance(name, str | int | float) and (clean := " ".join(str(name).split())):
            out.setdefault(normalize_name(clean), clean)
    return list(out.values())


def parse_graph(text: str) -> ExtractedGraph:
    value = _json_value(text)
    if not isinstance(value, dict):
        raise ExtractionError("the graph is not a JSON object")
    entities = [e for e in value.get("entities") or [] if isinstance(e, dict) and str(e.get("name") or "").strip()]
    relationships = [r for r in value.get("relationships") or []
                     if isinstance(r, dict) and str(r.get("source") or "").strip() and str(r.get("target") or "").strip()]
    try:
        return ExtractedGraph.model_validate({"entities": entities, "relationships": relationships})
    except ValidationError as exc:
        raise ExtractionError(f"the graph does not have the expected shape: {exc}") from exc


async def _ask(client: ChatClient, prompt: str, options: ChatOptions) -> str:
    """Structured output first, then the plain prompt for servers that reject response_format."""
    messages: list[Message] = [{"role": "user", "content": prompt}]
    try:
        return (await client.chat(messages, options)).content
    except ChatModelError:
        return (await client.chat(messages, replace(options, response_format=None))).content


async def extract_query_entities(query: str, client: ChatClient) -> list[str]:
    """ExtractEntity: the entities a question is about (raises ChatModelError, ExtractionError)."""
    prompt = prompts.render(prompts.get("graph_extraction", "extract_entity").text(), query=query)
    options = ChatOptions(temperature=0.0, max_tokens=defaults.ENTITY_EXTRACT_MAX_TOKENS, response_format=ENTITIES_FORMAT)
    return parse_entities(await _ask(client, prompt, options))


async def extract_graph(text: str, client: ChatClient) -> ExtractedGraph:
    """ExtractGraph: entities and relationships of one passage (raises ChatModelError, ExtractionError)."""
    prompt = prompts.render(prompts.get("graph_extraction", "extract_graph").text(), content=text)
    options = ChatOptions(temperature=0.0, max_tokens=defaults.GRAPH_EXTRACT_MAX_TOKENS, response_format=GRAPH_FORMAT)
    return parse_graph(await _ask(client, prompt, options))


class TextChunk(Protocol):
    """What extraction reads of a chunk (ragline.retrieval.catalog.ChunkRecord fits)."""

    id: str
    content: str


@dataclass(frozen=True)
class GraphExtractionReport:
    chunks: int
    failed_chunks: int
    nodes: int
    relations: int
    errors: tuple[str, ...] = ()


async def extract_document_graph(
    store: GraphStore,
    knowledge_base_id: str,
    knowledge_id: str,
    chunks: Sequence[TextChunk],
    client: ChatClient,
    concurrency: int = defaults.GRAPH_EXTRACT_CONCURRENCY,
) -> GraphExtractionReport:
    """The ingestion step: extract every chunk, merge by entity name, replace the document's graph.

    A chunk the model fails on is skipped (and reported); the graph keeps what the other chunks
    gave. Chunks with `indexed=False` (parents of parent/child chunking) are skipped: search
    returns indexed chunks only.
    """
    todo = [c for c in chunks if getattr(c, "indexed", True) and c.content.strip()]
    semaphore = asyncio.Semaphore(max(1, concurrency))

    async def one(chunk: TextChunk) -> ExtractedGraph | str:
        async with semaphore:
            try:
                return await extract_graph(chunk.content, client)
            except (ChatModelError, ExtractionError) as exc:
                log.warning("graph extraction failed for chunk %s: %s", chunk.id, exc)
                return str(exc)

    outcomes = await asyncio.gather(*(one(c) for c in todo))
    nodes: list[GraphNode] = []
    relations: list[GraphRelation] = []
    errors: list[str] = []
    for chunk, outcome in zip(todo, outcomes):
        if isinstance(outcome, str):
            errors.append(outcome)
            continue
        nodes += [GraphNode(e.name, knowledge_base_id, knowledge_id, e.type, e.description, [chunk.id]) for e in outcome.entities]
        relations += [GraphRelation(r.source, r.target, r.relation, knowledge_base_id, knowledge_id, r.description, [chunk.id])
                      for r in outcome.relationships]
    if todo and len(errors) == len(todo):
        # nothing was extracted: keep the document's previous graph rather than wiping it
        return GraphExtractionReport(len(todo), len(errors), 0, 0, tuple(errors))
    nodes, relations = normalize_document_graph(knowledge_base_id, knowledge_id, nodes, relations)
    await store.replace_document(knowledge_base_id, knowledge_id, nodes, relations)
    return GraphExtractionReport(len(todo), len(errors), len(nodes), len(relations), tuple(errors))
