"""The seed's pipelines as stage lists, and the edges they allow: the oracle the written-out graphs
(graph/graphs.py) are checked against.

Each pipeline is the seed's list of stages (types.NewPipelineBuilder: Add and AddIf), each stage
its plugin chain as node names. `allowed_edges` plays every turn the list allows (each AddIf
condition true and false, the intent needing retrieval or not, the search finding something or
nothing) and records every step from one node to the next, with the progress cards opened before
their first stage and closed after their last. A refused turn or a failed search takes no step:
the stage raises (TurnFailed), so no edge exists for it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

START, END, FALLBACK = "__start__", "__end__", "fallback"
HISTORY, KNOWLEDGE, RETRIEVAL, WEB, DATA = "has_history", "uses_knowledge", "needs_retrieval", "web_search", "data_analysis"
CONDITIONS = (HISTORY, KNOWLEDGE, RETRIEVAL, WEB, DATA)
QUERY_CARD, SEARCH_CARD = "query_understand", "knowledge_search"


@dataclass(frozen=True)
class Stage:
    chain: tuple[str | tuple[str, ...], ...]  # node names in order; a tuple of names runs side by side
    conditions: frozenset[str] = frozenset()  # AddIf (and NeedsRetrieval): runs only when all hold
    card: str = ""  # the progress card it is shown under
    searches: bool = False  # may find nothing (the fallback answer)

    def when(self, *conditions: str) -> Stage:
        return Stage(self.chain, self.conditions | set(conditions), self.card, self.searches)


LOAD_HISTORY = Stage(("load_history",), frozenset({HISTORY}))
MEMORY_RECALL = Stage(("memory_recall",))
QUERY_UNDERSTAND = Stage(("query_understand", "extract_entity"), card=QUERY_CARD)
CHUNK_SEARCH = Stage(("chunk_search_parallel", "chunk_search", "check_search_nothing"), frozenset({RETRIEVAL}), SEARCH_CARD, True)
CHUNK_SEARCH_PARALLEL = Stage(("chunk_search_parallel", ("chunk_search", "entity_search"), "check_search_nothing"),
                              frozenset({RETRIEVAL}), SEARCH_CARD, True)
CHUNK_RERANK = Stage(("rerank", "memory_affinity", "wiki_boost"), frozenset({RETRIEVAL}), SEARCH_CARD)
WEB_FETCH = Stage(("web_fetch",), frozenset({RETRIEVAL, WEB}), SEARCH_CARD)
CHUNK_MERGE = Stage(("chunk_merge",), frozenset({RETRIEVAL}), SEARCH_CARD)
FILTER_TOP_K = Stage(("filter_top_k",), frozenset({RETRIEVAL}), SEARCH_CARD)
DATA_ANALYSIS = Stage(("data_analysis",), frozenset({RETRIEVAL, DATA}), SEARCH_CARD)
INTO_CHAT_MESSAGE = Stage(("into_chat_message",))
CHAT_COMPLETION = Stage(("chat_completion",))
CHAT_COMPLETION_STREAM = Stage(("chat_completion_stream",))

RAG_PIPELINE = (LOAD_HISTORY, MEMORY_RECALL, QUERY_UNDERSTAND, CHUNK_SEARCH_PARALLEL, CHUNK_RERANK, WEB_FETCH, CHUNK_MERGE,
                FILTER_TOP_K, DATA_ANALYSIS, INTO_CHAT_MESSAGE, CHAT_COMPLETION_STREAM)
CHAT_PIPELINE = (LOAD_HISTORY, MEMORY_RECALL, CHAT_COMPLETION_STREAM)
# KnowledgeQA builds one of the two per request; the chat list is a subsequence of the RAG list, so
# gating the difference with uses_knowledge gives both in one graph
DYNAMIC = tuple(stage if stage in CHAT_PIPELINE else stage.when(KNOWLEDGE) for stage in RAG_PIPELINE)

PIPELINES: dict[str, tuple[Stage, ...]] = {
    "ragline": DYNAMIC,
    "ragline_chat": DYNAMIC,
    "rag_stream": RAG_PIPELINE,
    "rag": (QUERY_UNDERSTAND, CHUNK_SEARCH, CHUNK_RERANK, CHUNK_MERGE, INTO_CHAT_MESSAGE, CHAT_COMPLETION),
    "chat_history_stream": CHAT_PIPELINE,
    "chat_stream": (CHAT_COMPLETION_STREAM,),
    "chat": (CHAT_COMPLETION,),
}
OUTCOMES = ("found", "nothing")


def _turn(stages: tuple[Stage, ...], holds: set[str], outcome: str) -> list[str | tuple[str, ...]]:
    """The nodes one turn passes, in order (a tuple: nodes running side by side)."""
    path: list[str | tuple[str, ...]] = [START, "begin_turn"]
    card = ""
    for stage in stages:
        if not stage.conditions <= holds:
            continue
        if stage.card != card:
            path += [f"close_{card}"] if card else []
            path += [f"open_{stage.card}"] if stage.card else []
            card = stage.card
        path += stage.chain
        if stage.searches and outcome == "nothing":
            return [*path, f"close_{card}", FALLBACK, END]
    return [*path, *([f"close_{card}"] if card else []), END]


def _steps(path: list[str | tuple[str, ...]]) -> set[tuple[str, str]]:
    steps: set[tuple[str, str]] = set()
    for before, after in itertools.pairwise(path):
        for source in before if isinstance(before, tuple) else (before,):
            steps |= {(source, target) for target in (after if isinstance(after, tuple) else (after,))}
    return steps


def allowed_edges(name: str) -> set[tuple[str, str]]:
    """Every step between two nodes that some turn of the seed's pipeline `name` takes."""
    edges: set[tuple[str, str]] = set()
    for values in itertools.product((True, False), repeat=len(CONDITIONS)):
        holds = {condition for condition, value in zip(CONDITIONS, values, strict=True) if value}
        for outcome in OUTCOMES:
            edges |= _steps(_turn(PIPELINES[name], holds, outcome))
    return edges


def written_edges(graph) -> set[tuple[str, str]]:
    """Every edge the compiled graph was built with: plain, joined, and each router's `Literal`
    targets, with the cards (subgraphs) opened up."""
    return _edges(graph.builder)


def _edges(builder) -> set[tuple[str, str]]:
    raw = set(builder.edges) | {(source, end) for starts, end in builder.waiting_edges for source in starts}
    for source, routers in builder.branches.items():
        for name, router in routers.items():
            assert router.ends, f"the router {name} after {source} names no targets: type it Literal[...]"
            raw |= {(source, target) for target in router.ends.values()}
    cards = {name: _edges(node.runnable.builder) for name, node in builder.nodes.items() if hasattr(node.runnable, "builder")}
    edges: set[tuple[str, str]] = set()
    for source, target in raw:
        sources = [inner for inner, end in cards[source] if end == END] if source in cards else [source]
        targets = [inner for start, inner in cards[target] if start == START] if target in cards else [target]
        edges |= {(a, b) for a in sources for b in targets}
    for inside in cards.values():
        edges |= {(a, b) for a, b in inside if a != START and b != END}
    return edges


def drawn_edges(graph) -> set[tuple[str, str]]:
    """The edges Studio draws: the compiled graph with its cards open (xray), nodes named without their card."""
    return {(edge.source.split(":")[-1], edge.target.split(":")[-1]) for edge in graph.get_graph(xray=True).edges}
