"""The graph Studio draws is the pipeline: every router lists only the places it can reach."""

from __future__ import annotations

import pytest
from langgraph.graph import END, START

from ragline.graph.builder import PRESETS, dynamic_pipeline, stage_nodes
from ragline.graph.graphs import GRAPH_NAMES, build_graph

MAX_EDGES = 45

# Who may follow whom in the two RAG graphs, read off the seed's stage list: the chain inside a
# stage, the AddIf skips (load_history, web_fetch, data_analysis; the RAG stages when no knowledge
# is in scope; the search window when the intent needs no retrieval), fallback only after the
# search card closes, END for a stop or an error.
RAG_STREAM = {
    START: {"begin_turn"},
    "begin_turn": {"load_history", "memory_recall", END},
    "load_history": {"memory_recall", END},
    "memory_recall": {"open_query_understand", END},
    "open_query_understand": {"query_understand"},
    "query_understand": {"extract_entity"},
    "extract_entity": {"close_query_understand"},
    "close_query_understand": {"open_knowledge_search", "into_chat_message", END},
    "open_knowledge_search": {"chunk_search_parallel"},
    "chunk_search_parallel": {"chunk_search", "entity_search"},
    "chunk_search": {"check_search_nothing"},
    "entity_search": {"check_search_nothing"},
    "check_search_nothing": {"rerank", "close_knowledge_search"},
    "rerank": {"memory_affinity"},
    "memory_affinity": {"wiki_boost"},
    "wiki_boost": {"web_fetch", "chunk_merge", "close_knowledge_search"},
    "web_fetch": {"chunk_merge", "close_knowledge_search"},
    "chunk_merge": {"filter_top_k", "close_knowledge_search"},
    "filter_top_k": {"data_analysis", "close_knowledge_search"},
    "data_analysis": {"close_knowledge_search"},
    "close_knowledge_search": {"into_chat_message", "fallback", END},
    "into_chat_message": {"chat_completion_stream", END},
    "chat_completion_stream": {END},
    "fallback": {END},
}
RAGLINE = {**RAG_STREAM, "memory_recall": {"open_query_understand", "chat_completion_stream", END}}


def adjacency(name: str) -> dict[str, set[str]]:
    graph = build_graph(name).get_graph()
    out: dict[str, set[str]] = {}
    for edge in graph.edges:
        out.setdefault(edge.source, set()).add(edge.target)
    return out


@pytest.mark.parametrize("name, expected", [("rag_stream", RAG_STREAM), ("ragline", RAGLINE), ("ragline_chat", RAGLINE)])
def test_every_router_lists_exactly_the_targets_the_stage_list_allows(name, expected):
    assert adjacency(name) == expected


@pytest.mark.parametrize("name", GRAPH_NAMES)
def test_every_graph_stays_within_the_edge_budget(name):
    assert len(build_graph(name).get_graph().edges) <= MAX_EDGES


@pytest.mark.parametrize("name", GRAPH_NAMES)
def test_edges_only_move_forward_through_the_builders_stage_list(name):
    pipeline = dynamic_pipeline() if name in ("ragline", "ragline_chat") else PRESETS[name]()
    stages = list(stage_nodes(pipeline))
    order = {node: i for i, node in enumerate(["begin_turn", *stages])}
    for source, targets in adjacency(name).items():
        for target in targets - {END, "fallback"}:
            if source in order and target in order:
                assert order[target] > order[source], f"{source} -> {target} goes backwards"
    drawn = {n for n in build_graph(name).get_graph().nodes} - {START, END}
    windows = {n for n in drawn if n.startswith(("open_", "close_"))}
    assert drawn - windows - {"begin_turn", "fallback"} == set(stages)  # no node the stage list does not name


def test_the_rerank_chain_and_the_parallel_search_are_plain_edges():
    graph = build_graph("rag_stream").get_graph()
    plain = {(e.source, e.target) for e in graph.edges if not e.conditional}
    assert {("rerank", "memory_affinity"), ("memory_affinity", "wiki_boost"),
            ("chunk_search_parallel", "chunk_search"), ("chunk_search_parallel", "entity_search")} <= plain
