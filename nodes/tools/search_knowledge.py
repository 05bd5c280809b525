"""search_knowledge: the hybrid search and rerank chain over the turn's knowledge bases, as a tool.

The seed's agent tool of the same name (knowledgebase_search*.go HybridSearch): the same search
path as the search API and the LangChain retriever (retrieval/passages.py). The passages are
registered in the answer's one citation registry and the model reads them aliased (cN, dN, bN),
exactly as the pipeline renders its contexts, so a citation resolves whichever round found it.
The search's image hits are kept aside before the rerank (retrieval/passages.py), given to the
model after the reranked passages, and the images of all of them are named in the outcome: a
model that sees gets the pictures themselves in its next round (graph/agent.py), labelled with
their passages' handles. Only the images' identities are kept, never their bytes.
"""

from __future__ import annotations

from typing import Any

from ragline.generation.citing import source_chunks
from ragline.generation.vision import context_image_refs
from ragline.nodes.tools.base import AgentTool, ToolContext, ToolOutcome, passage_summary
from ragline.retrieval.passages import QUERY_LIMIT, search_with_images

NOTHING_FOUND = "No passages matched the query. Try other words, or answer with what you have."


async def search_knowledge(arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ValueError("search_knowledge needs a non-empty query")
    if not context.knowledge_bases:
        raise ValueError("this turn has no knowledge base to search")
    services = context.services
    found = await search_with_images(services.retrieval, services.reranker(), query, context.knowledge_bases, context.who)
    hits = found.passages + found.image_candidates
    sources = source_chunks(hits)
    rendered = context.registry.render_context(sources)
    images = [{"chunk_id": ref.chunk_id, "url": ref.url} for ref in context_image_refs(hits)]
    return ToolOutcome(rendered if sources else NOTHING_FOUND, passage_summary(context.registry, sources), sources, images)


SEARCH_KNOWLEDGE = AgentTool(
    name="search_knowledge",
    description="Search the knowledge bases (hybrid keyword and vector search, reranked). Returns passages with handles (cN) to cite. "
                "Ask one focused question per call; search again with the facts you learned for a question that needs several steps.",
    parameters={"type": "object", "properties": {"query": {"type": "string", "maxLength": QUERY_LIMIT, "description": "What to look for."}},
                "required": ["query"]},
    run=search_knowledge,
)
