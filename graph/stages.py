"""Which node implements each stage of the seed, and how the graph treats it.

Only stages that exist are listed; the builder wires nothing else. Retrieval issues add their
nodes here as they land (chunk_search_parallel, rerank, merge, ...).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ragline.graph.events import ProgressWindow
from ragline.nodes.chat_completion import chat_completion
from ragline.nodes.chat_completion_stream import chat_completion_stream
from ragline.nodes.load_history import load_history
from ragline.nodes.query_understand import query_understand

NodeFn = Callable[..., Awaitable[dict[str, Any]]]


class Stage(StrEnum):
    """The seed's EventTypes, one node each."""

    LOAD_HISTORY = "load_history"
    MEMORY_RECALL = "memory_recall"
    QUERY_UNDERSTAND = "query_understand"
    CHUNK_SEARCH = "chunk_search"
    CHUNK_SEARCH_PARALLEL = "chunk_search_parallel"
    ENTITY_SEARCH = "entity_search"
    CHUNK_RERANK = "chunk_rerank"
    WEB_FETCH = "web_fetch"
    CHUNK_MERGE = "chunk_merge"
    FILTER_TOP_K = "filter_top_k"
    DATA_ANALYSIS = "data_analysis"
    INTO_CHAT_MESSAGE = "into_chat_message"
    CHAT_COMPLETION = "chat_completion"
    CHAT_COMPLETION_STREAM = "chat_completion_stream"


@dataclass(frozen=True)
class NodeSpec:
    node: NodeFn
    needs_retrieval: bool = False  # skipped when the intent needs no retrieval (NeedsRetrieval)
    window: ProgressWindow | None = None  # the progress card this stage runs under
    result_keys: tuple[str, ...] = ()  # state keys shown in the window's tool_result


STAGE_NODES: dict[Stage, NodeSpec] = {
    Stage.LOAD_HISTORY: NodeSpec(load_history),
    Stage.QUERY_UNDERSTAND: NodeSpec(
        query_understand, window=ProgressWindow.QUERY_UNDERSTAND, result_keys=("rewrite_query", "intent")
    ),
    Stage.CHAT_COMPLETION: NodeSpec(chat_completion),
    Stage.CHAT_COMPLETION_STREAM: NodeSpec(chat_completion_stream),
}
