"""Which node implements each stage of the seed, and how the graph treats it.

Only stages that exist are listed; the builder wires nothing else. A stage is its seed plugin
chain as nodes, in the seed's chain order (query_understand -> extract_entity; rerank ->
memory_affinity -> wiki_boost), with parallel branches where the seed clones ChatManage.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ragline.graph.events import ProgressWindow
from ragline.nodes.chat_completion import chat_completion
from ragline.nodes.chat_completion_stream import chat_completion_stream
from ragline.nodes.chunk_merge import chunk_merge
from ragline.nodes.chunk_search import chunk_search
from ragline.nodes.chunk_search_parallel import (
    check_search_nothing,
    chunk_search_parallel,
)
from ragline.nodes.data_analysis import data_analysis
from ragline.nodes.entity_search import entity_search
from ragline.nodes.extract_entity import extract_entity
from ragline.nodes.filter_top_k import filter_top_k
from ragline.nodes.into_chat_message import into_chat_message
from ragline.nodes.load_history import load_history
from ragline.nodes.memory_affinity import memory_affinity
from ragline.nodes.memory_recall import memory_recall
from ragline.nodes.query_understand import query_understand
from ragline.nodes.rerank import rerank
from ragline.nodes.web_fetch import web_fetch
from ragline.nodes.wiki_boost import wiki_boost

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
class Node:
    """One graph node; named after its function unless told otherwise."""

    fn: NodeFn
    name: str = ""

    @property
    def node_name(self) -> str:
        return self.name or self.fn.__name__


@dataclass(frozen=True)
class Parallel:
    """Nodes that run side by side (the seed's Clone + RunParallel); the next node joins them.

    Branches write only keys with reducers, so their updates merge instead of colliding.
    """

    branches: tuple[Node, ...]


@dataclass(frozen=True)
class StageSpec:
    """How the graph runs one seed stage: its plugin chain as nodes, in the seed's chain order."""

    chain: tuple[Node | Parallel, ...]
    needs_retrieval: bool = False  # skipped when the intent needs no retrieval (NeedsRetrieval)
    finds_nothing: bool = False  # may end in ErrSearchNothing, which leads to the fallback answer
    window: ProgressWindow | None = None  # the progress card this stage runs under
    result_keys: tuple[str, ...] = ()  # state keys shown in the window's tool_result

    @classmethod
    def of(cls, *chain: NodeFn | Node | Parallel, **options: Any) -> StageSpec:
        return cls(tuple(item if isinstance(item, Node | Parallel) else Node(item) for item in chain), **options)

    @property
    def node_names(self) -> list[str]:
        names: list[str] = []
        for item in self.chain:
            names += [node.node_name for node in item.branches] if isinstance(item, Parallel) else [item.node_name]
        return names


_SEARCH = ProgressWindow.KNOWLEDGE_SEARCH

STAGE_NODES: dict[Stage, StageSpec] = {
    Stage.LOAD_HISTORY: StageSpec.of(load_history),
    Stage.MEMORY_RECALL: StageSpec.of(memory_recall),
    # the seed's chain on query_understand: rewrite + intent, then query entities for the graph
    Stage.QUERY_UNDERSTAND: StageSpec.of(
        query_understand, extract_entity, window=ProgressWindow.QUERY_UNDERSTAND, result_keys=("rewrite_query", "intent")
    ),
    Stage.CHUNK_SEARCH: StageSpec.of(
        chunk_search_parallel, chunk_search, check_search_nothing, needs_retrieval=True, finds_nothing=True, window=_SEARCH
    ),
    Stage.CHUNK_SEARCH_PARALLEL: StageSpec.of(
        chunk_search_parallel,
        Parallel((Node(chunk_search), Node(entity_search))),
        check_search_nothing,
        needs_retrieval=True,
        finds_nothing=True,
        window=_SEARCH,
    ),
    # the seed's chain order on chunk_rerank: rerank, then memory affinity, then the wiki boost
    Stage.CHUNK_RERANK: StageSpec.of(rerank, memory_affinity, wiki_boost, needs_retrieval=True, window=_SEARCH),
    Stage.WEB_FETCH: StageSpec.of(web_fetch, needs_retrieval=True, window=_SEARCH),
    Stage.CHUNK_MERGE: StageSpec.of(chunk_merge, needs_retrieval=True, window=_SEARCH),
    Stage.FILTER_TOP_K: StageSpec.of(filter_top_k, needs_retrieval=True, window=_SEARCH),
    Stage.DATA_ANALYSIS: StageSpec.of(data_analysis, needs_retrieval=True, window=_SEARCH),
    Stage.INTO_CHAT_MESSAGE: StageSpec.of(into_chat_message),
    Stage.CHAT_COMPLETION: StageSpec.of(chat_completion),
    Stage.CHAT_COMPLETION_STREAM: StageSpec.of(chat_completion_stream),
}
