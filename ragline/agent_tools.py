"""Ragline for LangChain agents: a retriever and a ready tool.

```python
from langchain.agents import create_agent
from ragline.agent_tools import RaglineRetriever, ragline_tool, search_tool
from ragline.services import Services

services = Services.from_settings()
agent = create_agent(model, tools=[ragline_tool(services, knowledge_bases=["manuals"])])
docs = await RaglineRetriever(services=services, knowledge_bases=["manuals"]).ainvoke("reset the sensor")
```

- `RaglineRetriever` is a `BaseRetriever`: the hybrid search with the rerank chain, as the search
  API runs it, each passage a `Document` with its chunk id, score, title and source.
- `search_tool` is that retriever as an agent's tool (the passages as its content, the
  `Document`s as its artifact).
- `ragline_tool` asks the whole pipeline. Its schema is `{"query": str}`; the tool's content is
  the answer with `[n]` footnotes and its sources listed, its artifact the answer, the citations
  and the references as data.

Both run inside the caller's config: the tool's pipeline is a subgraph of the agent's run, so
Ragline's events (stream mode "custom") and the answer's tokens ("messages") reach the agent's
stream. Neither sets a thread id of its own, and the tool's pipeline keeps no checkpoint of its
own: the agent's conversation is the agent's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.tools.retriever import create_retriever_tool
from pydantic import BaseModel, ConfigDict, Field, InstanceOf

from ragline import defaults
from ragline.citations.plain import plain_text
from ragline.contracts.access import Principal
from ragline.contracts.context import RunContext, RunHost
from ragline.contracts.passages import SearchResult
from ragline.contracts.request import PipelineRequest
from ragline.contracts.state import TurnFailed
from ragline.graph.graphs import build_graph
from ragline.retrieval.passages import QUERY_LIMIT, search_passages
from ragline.services import Services

__all__ = ["QUERY_LIMIT", "AskInput", "RaglineRetriever", "passage_document", "ragline_tool", "search_tool", "tool_answer"]


class RaglineRetriever(BaseRetriever):
    """Passages of Ragline's knowledge bases for a query (hybrid search, then the rerank chain)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    services: InstanceOf[Services]  # the composition root (a dataclass pydantic must not look into)
    knowledge_bases: Sequence[str] = Field(description="Knowledge bases to search, by name or id.")
    tenant_id: str = "default"
    user_id: str = Field("default", description="Who reads: restricted documents are searched only when their rule lets this user in.")
    groups: Sequence[str] = Field((), description="The user's groups.")
    top_k: int = Field(defaults.DEFAULT_RERANK_TOP_K, ge=1, le=200)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return asyncio.run(self._search(query))

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun) -> list[Document]:
        return await self._search(query)

    async def _search(self, query: str) -> list[Document]:
        hits = await search_passages(self.services.retrieval, self.services.reranker(), query, self.knowledge_bases,
                                     Principal(self.tenant_id, self.user_id, frozenset(self.groups)), top_k=self.top_k)
        return [passage_document(hit) for hit in hits]


def passage_document(hit: SearchResult) -> Document:
    return Document(
        id=hit.id,
        page_content=hit.content,
        metadata={
            "chunk_id": hit.id,
            "score": hit.score,
            "title": hit.knowledge_title,
            "source": hit.metadata.get("source") or hit.knowledge_title,
            "knowledge_id": hit.knowledge_id,
            "knowledge_base_id": hit.knowledge_base_id,
            "chunk_type": hit.chunk_type.value,
            "match_type": hit.match_type.value,
        },
    )


def search_tool(services: Services, *, knowledge_bases: Sequence[str], name: str = "search_knowledge_base",
                description: str | None = None, tenant_id: str = "default", user_id: str = "default", groups: Sequence[str] = (),
                top_k: int = defaults.DEFAULT_RERANK_TOP_K) -> BaseTool:
    """The retriever as a tool: passages for the agent to read and cite itself."""
    retriever = RaglineRetriever(services=services, knowledge_bases=knowledge_bases, tenant_id=tenant_id, user_id=user_id,
                                 groups=groups, top_k=top_k)
    return create_retriever_tool(
        retriever, name, description or "Search the knowledge base; returns the passages that match the query.",
        response_format="content_and_artifact",
    )


class AskInput(BaseModel):
    query: str = Field(min_length=1, max_length=QUERY_LIMIT, description="The question, self-contained (the tool does not see the conversation).")


def ragline_tool(services: Services, *, knowledge_bases: Sequence[str] = (), name: str = "ask_knowledge_base",
                 description: str | None = None, tenant_id: str = "default", user_id: str = "default", groups: Sequence[str] = (),
                 **settings: Any) -> BaseTool:
    """A tool that answers a question from the knowledge bases through the whole pipeline.
    `settings` are further request settings (PipelineRequest fields) for every call."""
    graph = build_graph("ragline", checkpointer=False, services=services)
    template = PipelineRequest(query="?", knowledge_base_ids=tuple(knowledge_bases), **settings)

    async def ask(query: str, config: RunnableConfig) -> tuple[str, dict[str, Any]]:
        request = template.model_copy(update={"query": query})
        try:
            state = await graph.ainvoke({"request": request}, config, context=RunContext(tenant_id=tenant_id, user_id=user_id, groups=tuple(groups),
                                                                                   host=RunHost(services=services)))
        except TurnFailed as failed:  # a refused question, an unknown knowledge base, a failing store: the model is told
            state = {"error": failed.error}
        return tool_answer(state)

    return StructuredTool.from_function(
        coroutine=ask,
        name=name,
        description=description or "Answer a question from the knowledge base, citing its sources. Ask one self-contained question.",
        args_schema=AskInput,
        response_format="content_and_artifact",
    )


def tool_answer(state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The tool's content (the answer with [n] footnotes, then its sources) and its artifact."""
    response = state.get("chat_response")
    error = state.get("error")
    if response is None:
        message = error.message if error is not None else "no answer"
        return f"Ragline could not answer: {message}", {"answer": "", "citations": [], "references": [], "error": message}
    text, citations = plain_text(response.content, footnotes=True)
    sources: dict[int, str] = {}
    for citation in citations:
        sources.setdefault(citation.number, citation.title or citation.url or citation.chunk_id)
    listed = "\n".join(f"[{number}] {label}" for number, label in sorted(sources.items()))
    references = [hit.model_dump(mode="json") for hit in state.get("merge_results") or []]
    artifact = {"answer": plain_text(response.content)[0], "citations": [c.as_dict() for c in citations], "references": references,
                "fallback": response.fallback}
    return (f"{text}\n\nSources:\n{listed}" if listed else text), artifact
