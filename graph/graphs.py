"""The pipeline graphs, each written out: its nodes, then its edges, then `compile()`.

- `ragline`: the seed's two pipelines in one graph (session_knowledge_qa.go): with knowledge in
  scope the RAG stages run, else pure chat. `ragline_chat` is the same graph with messages in and
  out. Two progress cards are subgraphs (graph/cards.py): `query_understand` and
  `knowledge_search`.
- the seed's static presets (types.Pipeline): `chat`, `chat_stream`, `chat_history_stream`,
  `rag`, `rag_stream`.

Hosts compile their own with `build_graph`, giving the checkpointer they use and, when their run
context cannot carry objects (Studio, a parent graph), the services and agent defaults to fall
back on. `tests/graph/seed_oracle.py` checks each graph against the seed's stage lists.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from ragline.contracts.context import RunContext
from ragline.contracts.request import AgentConfig
from ragline.contracts.state import ChatInput, ChatOutput, PipelineInput, PipelineOutput, PipelineState
from ragline.graph.binding import HostDefaults
from ragline.graph.cards import knowledge_search_card, plain_knowledge_search_card, query_understand_card
from ragline.graph.routes import (
    after_begin_turn,
    after_knowledge_search,
    chat_or_rag,
    search_or_answer,
)
from ragline.nodes import begin_turn as turn_start
from ragline.nodes.chat_completion import chat_completion
from ragline.nodes.chat_completion_stream import chat_completion_stream
from ragline.nodes.fallback import fallback
from ragline.nodes.into_chat_message import into_chat_message
from ragline.nodes.load_history import load_history
from ragline.nodes.memory_recall import memory_recall
from ragline.services import Services

Graph = CompiledStateGraph[PipelineState, RunContext, PipelineInput, PipelineOutput]  # a compiled pipeline
FALLBACK = "fallback"  # the node that answers "nothing found"
CHAT_GRAPH = "ragline_chat"


def _graph(messages_form: bool = False) -> StateGraph[PipelineState, RunContext, Any, Any]:
    schemas: dict[str, Any] = ({"input_schema": ChatInput, "output_schema": ChatOutput} if messages_form
                               else {"input_schema": PipelineInput, "output_schema": PipelineOutput})
    return StateGraph(PipelineState, context_schema=RunContext, **schemas)


def ragline_graph(host: HostDefaults, *, checkpointer: Any = None, messages_form: bool = False, rag_only: bool = False,
                  name: str = "ragline") -> Graph:
    """Chat or RAG per request: history, memories, then the two cards and the answer, or the answer
    alone. `rag_only`: the seed's `rag_stream` preset, every stage whatever the request's scope."""
    graph = _graph(messages_form)
    graph.add_node("begin_turn", host(turn_start.begin_chat_turn if messages_form else turn_start.begin_turn))
    graph.add_node("load_history", host(load_history))
    graph.add_node("memory_recall", host(memory_recall))
    graph.add_node("query_understand", query_understand_card(host))
    graph.add_node("knowledge_search", knowledge_search_card(host))
    graph.add_node("into_chat_message", host(into_chat_message))
    graph.add_node("chat_completion_stream", host(chat_completion_stream))
    graph.add_node(FALLBACK, host(fallback))

    graph.add_edge(START, "begin_turn")
    graph.add_conditional_edges("begin_turn", after_begin_turn)
    graph.add_edge("load_history", "memory_recall")
    if rag_only:
        graph.add_edge("memory_recall", "query_understand")
    else:
        graph.add_conditional_edges("memory_recall", chat_or_rag)
    graph.add_conditional_edges("query_understand", search_or_answer)
    graph.add_conditional_edges("knowledge_search", after_knowledge_search)
    graph.add_edge("into_chat_message", "chat_completion_stream")
    graph.add_edge("chat_completion_stream", END)
    graph.add_edge(FALLBACK, END)
    return graph.compile(checkpointer=checkpointer, name=name)


def rag_stream(host: HostDefaults, *, checkpointer: Any = None) -> Graph:
    """The seed's RAG pipeline (rag_stream): the `ragline` graph without its pure-chat branch."""
    return ragline_graph(host, checkpointer=checkpointer, rag_only=True, name="rag_stream")


def rag(host: HostDefaults, *, checkpointer: Any = None) -> Graph:
    """The seed's `rag` preset: understand, search, rerank and merge, then one whole answer."""
    graph = _graph()
    graph.add_node("begin_turn", host(turn_start.begin_turn))
    graph.add_node("query_understand", query_understand_card(host))
    graph.add_node("knowledge_search", plain_knowledge_search_card(host))
    graph.add_node("into_chat_message", host(into_chat_message))
    graph.add_node("chat_completion", host(chat_completion))
    graph.add_node(FALLBACK, host(fallback))

    graph.add_edge(START, "begin_turn")
    graph.add_edge("begin_turn", "query_understand")
    graph.add_conditional_edges("query_understand", search_or_answer)
    graph.add_conditional_edges("knowledge_search", after_knowledge_search)
    graph.add_edge("into_chat_message", "chat_completion")
    graph.add_edge("chat_completion", END)
    graph.add_edge(FALLBACK, END)
    return graph.compile(checkpointer=checkpointer, name="rag")


def chat_history_stream(host: HostDefaults, *, checkpointer: Any = None) -> Graph:
    """Pure chat with the thread's history and the user's memories, streamed."""
    graph = _graph()
    graph.add_node("begin_turn", host(turn_start.begin_turn))
    graph.add_node("load_history", host(load_history))
    graph.add_node("memory_recall", host(memory_recall))
    graph.add_node("chat_completion_stream", host(chat_completion_stream))

    graph.add_edge(START, "begin_turn")
    graph.add_conditional_edges("begin_turn", after_begin_turn)
    graph.add_edge("load_history", "memory_recall")
    graph.add_edge("memory_recall", "chat_completion_stream")
    graph.add_edge("chat_completion_stream", END)
    return graph.compile(checkpointer=checkpointer, name="chat_history_stream")


def chat_stream(host: HostDefaults, *, checkpointer: Any = None) -> Graph:
    """The question answered by the chat model, streamed."""
    graph = _graph()
    graph.add_node("begin_turn", host(turn_start.begin_turn))
    graph.add_node("chat_completion_stream", host(chat_completion_stream))

    graph.add_edge(START, "begin_turn")
    graph.add_edge("begin_turn", "chat_completion_stream")
    graph.add_edge("chat_completion_stream", END)
    return graph.compile(checkpointer=checkpointer, name="chat_stream")


def chat(host: HostDefaults, *, checkpointer: Any = None) -> Graph:
    """The question answered by the chat model in one piece."""
    graph = _graph()
    graph.add_node("begin_turn", host(turn_start.begin_turn))
    graph.add_node("chat_completion", host(chat_completion))

    graph.add_edge(START, "begin_turn")
    graph.add_edge("begin_turn", "chat_completion")
    graph.add_edge("chat_completion", END)
    return graph.compile(checkpointer=checkpointer, name="chat")


PRESETS: dict[str, Callable[..., Graph]] = {
    "chat": chat, "chat_stream": chat_stream, "chat_history_stream": chat_history_stream, "rag": rag, "rag_stream": rag_stream,
}
GRAPH_NAMES = ("ragline", CHAT_GRAPH, *PRESETS)


def build_graph(preset: str = "ragline", *, checkpointer: Any = None, services: Services | None = None, agent: Any = None,
                knowledge_bases: Sequence[str] = ()) -> Graph:
    """A compiled pipeline.

    `services` (ragline.services.Services) serves runs whose context has none; so does `agent`
    (an AgentConfig, or its fields as a dict: the defaults of every request setting).
    `knowledge_bases` (names or ids) is a shorthand for the agent's `knowledge_base_ids`.
    """
    host = HostDefaults(services=services, agent=_agent(agent, knowledge_bases))
    if preset in ("ragline", CHAT_GRAPH):
        return ragline_graph(host, checkpointer=checkpointer, messages_form=preset == CHAT_GRAPH, name=preset)
    if preset not in PRESETS:
        raise ValueError(f"unknown pipeline {preset!r}; choose one of {', '.join(GRAPH_NAMES)}")
    return PRESETS[preset](host, checkpointer=checkpointer)


def _agent(agent: Any, knowledge_bases: Sequence[str]) -> AgentConfig | None:
    if agent is None and not knowledge_bases:
        return None
    fields = agent.model_dump(exclude_none=True) if isinstance(agent, AgentConfig) else dict(agent or {})
    if knowledge_bases:
        fields["knowledge_base_ids"] = tuple(knowledge_bases)
    return AgentConfig.model_validate(fields)
