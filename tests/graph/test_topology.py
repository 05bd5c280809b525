"""The graph Studio draws is the pipeline: each written-out graph has exactly the edges the seed's
stage list allows (tests/graph/seed_oracle.py), its cards are subgraphs, and its routers are
typed over their real targets."""

from __future__ import annotations

import inspect
import typing

import pytest
from langgraph.graph import END, START

from ragline.graph import routes
from ragline.graph.graphs import GRAPH_NAMES, build_graph
from tests.graph.seed_oracle import PIPELINES, allowed_edges, drawn_edges, written_edges

MAX_TOP_LEVEL_NODES = 12


@pytest.mark.parametrize("name", GRAPH_NAMES)
def test_every_graph_has_exactly_the_edges_the_seed_stage_list_allows(name):
    written, allowed = written_edges(build_graph(name)), allowed_edges(name)
    assert sorted(written - allowed) == [] and sorted(allowed - written) == []


@pytest.mark.parametrize("name", GRAPH_NAMES)
def test_studio_draws_exactly_those_edges(name):
    assert drawn_edges(build_graph(name)) == allowed_edges(name)


def test_the_oracle_sees_a_wrong_edge():
    allowed = allowed_edges("ragline")
    assert ("wiki_boost", "web_fetch") in allowed and ("wiki_boost", "chunk_merge") in allowed
    assert ("wiki_boost", "close_knowledge_search") not in allowed  # no stage after the rerank chain is skippable there
    assert ("load_history", END) not in allowed and ("memory_recall", END) not in allowed  # only a stop would take them
    assert ("close_knowledge_search", FALLBACK := "fallback") in allowed and ("close_query_understand", FALLBACK) not in allowed


def test_the_oracle_stage_lists_name_every_graph():
    assert set(PIPELINES) == set(GRAPH_NAMES)


@pytest.mark.parametrize("name", GRAPH_NAMES)
def test_the_top_level_is_small(name):
    nodes = set(build_graph(name).get_graph().nodes) - {START, END}
    assert len(nodes) <= MAX_TOP_LEVEL_NODES


def test_the_ragline_graph_shows_its_cards_as_subgraphs():
    top = set(build_graph("ragline").get_graph().nodes) - {START, END}
    assert top == {"begin_turn", "load_history", "memory_recall", "query_understand", "knowledge_search",
                   "into_chat_message", "chat_completion_stream", "fallback"}
    inside = set(build_graph("ragline").get_graph(xray=True).nodes)
    assert {"query_understand:extract_entity", "knowledge_search:rerank", "knowledge_search:open_knowledge_search"} <= inside


@pytest.mark.parametrize("name", GRAPH_NAMES)
def test_only_an_answer_ends_a_turn_in_the_picture(name):
    """A stop cancels the run and an error raises (TurnFailed): no edge to the end exists for either."""
    enders = {edge.source for edge in build_graph(name).get_graph().edges if edge.target == END}
    assert enders <= {"chat_completion_stream", "chat_completion", "fallback"}


def test_the_rerank_chain_and_the_parallel_search_are_plain_edges():
    plain = {(s.split(":")[-1], t.split(":")[-1]) for s, t, _, c in build_graph("rag_stream").get_graph(xray=True).edges if not c}
    assert {("rerank", "memory_affinity"), ("memory_affinity", "wiki_boost"),
            ("chunk_search_parallel", "chunk_search"), ("chunk_search_parallel", "entity_search")} <= plain


@pytest.mark.parametrize("name, router", [(n, f) for n, f in inspect.getmembers(routes, inspect.isfunction)
                                          if typing.get_type_hints(f).get("return") is not bool])
def test_every_router_is_typed_over_its_targets_and_says_its_condition(name, router):
    targets = typing.get_args(typing.get_type_hints(router)["return"])
    assert len(targets) >= 2 and all(isinstance(target, str) for target in targets)
    assert router.__doc__ and "\n" not in router.__doc__.strip()


def test_the_agent_graph_is_its_loop_and_only_its_answer_ends_a_turn():
    """begin_turn raises on a refused request, so the agent's picture has no error edge either;
    `authorize` (MCP OAuth) and `approval` pause the loop and return to it."""
    from ragline.graph.agent import build_agent_graph

    edges = {(edge.source, edge.target) for edge in build_agent_graph().get_graph().edges}
    assert {source for source, target in edges if target == END} == {"answer"}
    assert {("begin_turn", "model"), ("model", "authorize"), ("authorize", "model"), ("model", "approval"), ("approval", "tools"),
            ("model", "tools"), ("tools", "compact"), ("compact", "model"), ("model", "answer")} <= edges
