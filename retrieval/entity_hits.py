"""Chunks found through the entity graph (seed: search_entity.go), a retrieval service.

For a question's entities, nodes are matched per namespace in parallel: a whole knowledge base, or
each document of a scoped target. The chunks the matched nodes and their relations were read from
are fetched by id and kept only when they still belong to a knowledge base in scope (one the
caller may use) and to an existing document, and, for a scoped target, to one of its documents;
at most 30. Graph hits have no search score (0), which rerank replaces with the model's. The
pipeline's entity_search stage and agent mode's entity_lookup tool both call it.
"""

from __future__ import annotations

import asyncio

from ragline import defaults
from ragline.contracts.access import Principal
from ragline.contracts.passages import SearchResult
from ragline.entities.store import GraphStore
from ragline.entities.types import GraphMatch, Namespace
from ragline.retrieval.catalog import Catalog
from ragline.retrieval.scope import DocumentScope

GRAPH_SOURCE = "graph"


def namespaces_of(scope: DocumentScope) -> list[Namespace]:
    """The seed's NameSpace{KnowledgeBase, Knowledge} list searched in parallel."""
    out: list[Namespace] = []
    for kb_id, documents in scope.documents.items():
        if documents is None:
            out.append(Namespace(kb_id))
        else:
            out += [Namespace(kb_id, knowledge_id) for knowledge_id in sorted(documents)]
    return out


def _graph_facts(match: GraphMatch) -> tuple[list[str], dict[str, list[str]], dict[str, list[str]]]:
    """Chunk ids in match order (nodes first, then relations), with the entities and relations naming each."""
    order: list[str] = []
    entities: dict[str, list[str]] = {}
    relations: dict[str, list[str]] = {}
    for node in match.nodes:
        for chunk_id in node.chunk_ids:
            order.append(chunk_id)
            entities.setdefault(chunk_id, []).append(node.name)
    for rel in match.relations:
        for chunk_id in rel.chunk_ids:
            order.append(chunk_id)
            relations.setdefault(chunk_id, []).append(f"{rel.source} {rel.relation} {rel.target}".strip())
    return list(dict.fromkeys(order)), entities, relations


def graph_results(match: GraphMatch, catalog: Catalog, scope: DocumentScope, who: Principal,
                  limit: int = defaults.ENTITY_SEARCH_MAX_RESULTS) -> list[SearchResult]:
    """The matched chunks as SearchResults (score 0), checked against the catalog and the scope."""
    order, entities, relations = _graph_facts(match)
    chunks = catalog.get_chunks(order)
    kbs = catalog.get_kbs(sorted({c.knowledge_base_id for c in chunks.values()}))
    documents = catalog.get_knowledge_many(c.knowledge_id for c in chunks.values())
    results: list[SearchResult] = []
    for chunk_id in order:
        chunk = chunks.get(chunk_id)
        if chunk is None or not scope.allows(chunk.knowledge_base_id, chunk.knowledge_id):
            continue
        kb, document = kbs.get(chunk.knowledge_base_id), documents.get(chunk.knowledge_id)
        if kb is None or document is None or not kb.readable_by(who) or document.access.lets_in(who) is None:
            continue
        results.append(SearchResult(
            id=chunk.id, content=chunk.content, score=0.0, knowledge_id=chunk.knowledge_id,
            knowledge_base_id=chunk.knowledge_base_id, knowledge_title=document.title, chunk_index=chunk.chunk_index,
            chunk_type=chunk.chunk_type, pre_chunk_id=chunk.pre_id, next_chunk_id=chunk.next_id,
            parent_chunk_id=chunk.parent_id,
            metadata={**chunk.metadata, "source": GRAPH_SOURCE, "match_type": GRAPH_SOURCE,
                      "graph_entities": entities.get(chunk_id, []), "graph_relations": relations.get(chunk_id, [])},
        ))
        if len(results) >= limit:
            break
    return results


async def search_entity_graph(store: GraphStore, catalog: Catalog, scope: DocumentScope, entities: list[str],
                              who: Principal) -> tuple[GraphMatch, list[SearchResult]]:
    """The graph's match for `entities` in `scope` and the chunks behind it. Raises TimeoutError
    past ENTITY_SEARCH_TIMEOUT_S, and the store's GraphStoreError."""
    try:
        match = await asyncio.wait_for(store.search(namespaces_of(scope), entities), defaults.ENTITY_SEARCH_TIMEOUT_S)
    except TimeoutError as exc:
        raise TimeoutError(f"the entity graph did not answer within {defaults.ENTITY_SEARCH_TIMEOUT_S:g} s") from exc
    readable = await asyncio.to_thread(_readable_match, match, catalog, who)
    return readable, await asyncio.to_thread(graph_results, readable, catalog, scope, who)


def _readable_match(match: GraphMatch, catalog: Catalog, who: Principal) -> GraphMatch:
    """The nodes and relations extracted from documents `who` may read: an entity is seen only
    through passages its reader may see."""
    documents = catalog.get_knowledge_many({n.knowledge_id for n in match.nodes} | {r.knowledge_id for r in match.relations})
    kbs = catalog.get_kbs(sorted({d.knowledge_base_id for d in documents.values()}))

    def readable(knowledge_id: str) -> bool:
        document = documents.get(knowledge_id)
        kb = kbs.get(document.knowledge_base_id) if document else None
        return kb is not None and document is not None and kb.readable_by(who) and document.access.lets_in(who) is not None

    return GraphMatch([n for n in match.nodes if readable(n.knowledge_id)], [r for r in match.relations if readable(r.knowledge_id)])
