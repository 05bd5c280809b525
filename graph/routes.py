"""Where a turn goes next: the routers of the pipeline graphs (graph/graphs.py, graph/cards.py).

Each router is typed over the nodes it can really choose, so Studio draws exactly those edges;
its docstring says the condition. The conditions are the seed's AddIf tests (has_history, web
search, data analysis), its choice between the chat and the RAG pipeline (uses_knowledge), and
NeedsRetrieval (the intent). A stop is no route: the host cancels the run (service/runs.py); nor
is an error: the failing stage raises TurnFailed (events.fail_turn).
"""

from __future__ import annotations

from typing import Literal

from ragline.contracts.state import ErrorKind, PipelineState, needs_retrieval

# --- conditions ---


def has_history(state: PipelineState) -> bool:
    """Multi-turn is on and the thread has an earlier answer."""
    return state["request"].max_history_rounds > 0 and any(m.type == "ai" for m in state.get("messages", []))


def uses_knowledge(state: PipelineState) -> bool:
    """The seed's choice of the RAG pipeline: a knowledge base in scope or web search on."""
    return state["request"].uses_knowledge


# --- after begin_turn ---


def after_begin_turn(state: PipelineState) -> Literal["load_history", "memory_recall"]:
    """A thread with an earlier answer loads its history first (AddIf); any other turn recalls memories."""
    return "load_history" if has_history(state) else "memory_recall"


# --- the RAG stages ---


def chat_or_rag(state: PipelineState) -> Literal["query_understand", "chat_completion_stream"]:
    """Knowledge in scope (a knowledge base, documents, web search): the RAG stages; else pure chat."""
    return "query_understand" if uses_knowledge(state) else "chat_completion_stream"


def search_or_answer(state: PipelineState) -> Literal["knowledge_search", "into_chat_message"]:
    """The intent needs retrieval (NeedsRetrieval): search; a greeting or chitchat goes straight to the prompt."""
    return "knowledge_search" if needs_retrieval(state.get("intent", ""), state["request"]) else "into_chat_message"


def after_knowledge_search(state: PipelineState) -> Literal["into_chat_message", "fallback"]:
    """Nothing found: the fallback answer (ErrSearchNothing); else the prompt."""
    error = state.get("error")
    return "fallback" if error is not None and error.kind == ErrorKind.SEARCH_NOTHING else "into_chat_message"


# --- inside the knowledge_search card ---


def after_search(state: PipelineState) -> Literal["rerank", "close_knowledge_search"]:
    """Results: rerank them; nothing found: close the card (the turn goes to the fallback)."""
    return "close_knowledge_search" if state.get("error") is not None else "rerank"


def web_fetch_or_merge(state: PipelineState) -> Literal["web_fetch", "chunk_merge"]:
    """Web search on: fetch the result pages (AddIf); else merge."""
    return "web_fetch" if state["request"].web_search_enabled else "chunk_merge"


def data_analysis_or_close(state: PipelineState) -> Literal["data_analysis", "close_knowledge_search"]:
    """Data analysis on: query the knowledge base's tables (AddIf); else the search is done."""
    return "data_analysis" if state["request"].data_analysis_enabled else "close_knowledge_search"
