"""The progress cards as subgraphs: the stages a user sees as one card (the seed's progress.go).

A card's first node opens it (`tool_call`) and its last closes it (`tool_result`), so every way
through the card passes both; a stage that fails closes it as failed and raises (events.fail_turn). `get_graph(xray=True)` shows the stages inside.
A card returns the turn's results (TurnResults), never the request; only query_understand returns
the conversation, whose user message it captions (UnderstoodTurn).

Events emitted inside a card reach a caller that streams with `subgraphs=True` (the turn driver
does), as for any LangGraph subgraph.
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from ragline.contracts.context import RunContext
from ragline.contracts.events import ProgressWindow
from ragline.contracts.state import PipelineState, TurnResults, UnderstoodTurn
from ragline.graph.binding import HostDefaults
from ragline.graph.progress import close_window, open_window
from ragline.graph.routes import after_search, data_analysis_or_close, web_fetch_or_merge
from ragline.nodes.chunk_merge import chunk_merge
from ragline.nodes.chunk_search import chunk_search
from ragline.nodes.chunk_search_parallel import check_search_nothing, chunk_search_parallel
from ragline.nodes.data_analysis import data_analysis
from ragline.nodes.entity_search import entity_search
from ragline.nodes.extract_entity import extract_entity
from ragline.nodes.filter_top_k import filter_top_k
from ragline.nodes.memory_affinity import memory_affinity
from ragline.nodes.query_understand import query_understand
from ragline.nodes.rerank import rerank
from ragline.nodes.web_fetch import web_fetch
from ragline.nodes.wiki_boost import wiki_boost

Card = CompiledStateGraph[PipelineState, RunContext, PipelineState, Any]
QUERY_UNDERSTAND = ProgressWindow.QUERY_UNDERSTAND
KNOWLEDGE_SEARCH = ProgressWindow.KNOWLEDGE_SEARCH


def query_understand_card(host: HostDefaults) -> Card:
    """The rewrite and the intent (query_understand), then the question's entities (extract_entity)."""
    card = StateGraph(PipelineState, context_schema=RunContext, output_schema=UnderstoodTurn)
    card.add_node("open_query_understand", open_window(QUERY_UNDERSTAND))
    card.add_node("query_understand", host(query_understand))
    card.add_node("extract_entity", host(extract_entity))
    card.add_node("close_query_understand", close_window(QUERY_UNDERSTAND, ("rewrite_query", "intent")))

    card.add_edge(START, "open_query_understand")
    card.add_edge("open_query_understand", "query_understand")
    card.add_edge("query_understand", "extract_entity")
    card.add_edge("extract_entity", "close_query_understand")
    card.add_edge("close_query_understand", END)
    return card.compile(name="query_understand")


def knowledge_search_card(host: HostDefaults) -> Card:
    """The seed's RAG search: chunk and entity search side by side, the rerank chain (rerank, memory
    affinity, wiki boost), web pages when web search is on, merge, top-k, data analysis when on."""
    card = StateGraph(PipelineState, context_schema=RunContext, output_schema=TurnResults)
    card.add_node("open_knowledge_search", open_window(KNOWLEDGE_SEARCH))
    card.add_node("chunk_search_parallel", host(chunk_search_parallel))
    card.add_node("chunk_search", host(chunk_search))
    card.add_node("entity_search", host(entity_search))
    card.add_node("check_search_nothing", host(check_search_nothing))
    card.add_node("rerank", host(rerank))
    card.add_node("memory_affinity", host(memory_affinity))
    card.add_node("wiki_boost", host(wiki_boost))
    card.add_node("web_fetch", host(web_fetch))
    card.add_node("chunk_merge", host(chunk_merge))
    card.add_node("filter_top_k", host(filter_top_k))
    card.add_node("data_analysis", host(data_analysis))
    card.add_node("close_knowledge_search", close_window(KNOWLEDGE_SEARCH, ()))

    card.add_edge(START, "open_knowledge_search")
    card.add_edge("open_knowledge_search", "chunk_search_parallel")
    card.add_edge("chunk_search_parallel", "chunk_search")  # the two searches run side by side;
    card.add_edge("chunk_search_parallel", "entity_search")  # their results key de-duplicates
    card.add_edge(["chunk_search", "entity_search"], "check_search_nothing")
    card.add_conditional_edges("check_search_nothing", after_search)
    card.add_edge("rerank", "memory_affinity")
    card.add_edge("memory_affinity", "wiki_boost")
    card.add_conditional_edges("wiki_boost", web_fetch_or_merge)
    card.add_edge("web_fetch", "chunk_merge")
    card.add_edge("chunk_merge", "filter_top_k")
    card.add_conditional_edges("filter_top_k", data_analysis_or_close)
    card.add_edge("data_analysis", "close_knowledge_search")
    card.add_edge("close_knowledge_search", END)
    return card.compile(name="knowledge_search")


def plain_knowledge_search_card(host: HostDefaults) -> Card:
    """The `rag` preset's search: chunk search alone, the rerank chain, merge."""
    card = StateGraph(PipelineState, context_schema=RunContext, output_schema=TurnResults)
    card.add_node("open_knowledge_search", open_window(KNOWLEDGE_SEARCH))
    card.add_node("chunk_search_parallel", host(chunk_search_parallel))
    card.add_node("chunk_search", host(chunk_search))
    card.add_node("check_search_nothing", host(check_search_nothing))
    card.add_node("rerank", host(rerank))
    card.add_node("memory_affinity", host(memory_affinity))
    card.add_node("wiki_boost", host(wiki_boost))
    card.add_node("chunk_merge", host(chunk_merge))
    card.add_node("close_knowledge_search", close_window(KNOWLEDGE_SEARCH, ()))

    card.add_edge(START, "open_knowledge_search")
    card.add_edge("open_knowledge_search", "chunk_search_parallel")
    card.add_edge("chunk_search_parallel", "chunk_search")
    card.add_edge("chunk_search", "check_search_nothing")
    card.add_conditional_edges("check_search_nothing", after_search)
    card.add_edge("rerank", "memory_affinity")
    card.add_edge("memory_affinity", "wiki_boost")
    card.add_edge("wiki_boost", "chunk_merge")
    card.add_edge("chunk_merge", "close_knowledge_search")
    card.add_edge("close_knowledge_search", END)
    return card.compile(name="knowledge_search")
