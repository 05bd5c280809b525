"""The named graphs: `ragline` (dynamic: pure chat or RAG per request), `ragline_chat` (the same
pipeline, messages in and out) and the seed's presets.

Hosts compile their own with `build_graph`, giving the checkpointer they use and, when their run
context cannot carry objects (Studio, a parent graph), the services and agent defaults to fall
back on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragline.graph.builder import PRESETS, Graph, compile_pipeline, dynamic_pipeline
from ragline.graph.request import AgentConfig

CHAT_GRAPH = "ragline_chat"
GRAPH_NAMES = ("ragline", CHAT_GRAPH, *PRESETS)


def build_graph(preset: str = "ragline", *, checkpointer: Any = None, services: Any = None, agent: Any = None,
                knowledge_bases: Sequence[str] = ()) -> Graph:
    """A compiled pipeline.

    `services` (ragline.services.Services) serves runs whose context has none; so does `agent`
    (an AgentConfig, or its fields as a dict: the defaults of every request setting).
    `knowledge_bases` (names or ids) is a shorthand for the agent's `knowledge_base_ids`.
    """
    defaults = _agent(agent, knowledge_bases)
    if preset in ("ragline", CHAT_GRAPH):
        return compile_pipeline(dynamic_pipeline(), checkpointer=checkpointer, services=services, agent=defaults,
                                messages_form=preset == CHAT_GRAPH, name=preset)
    if preset not in PRESETS:
        raise ValueError(f"unknown pipeline {preset!r}; choose one of {', '.join(GRAPH_NAMES)}")
    return compile_pipeline(PRESETS[preset](), checkpointer=checkpointer, services=services, agent=defaults, name=preset)


def _agent(agent: Any, knowledge_bases: Sequence[str]) -> Any:
    if agent is None and not knowledge_bases:
        return None
    fields = agent.model_dump(exclude_none=True) if isinstance(agent, AgentConfig) else dict(agent or {})
    if knowledge_bases:
        fields["knowledge_base_ids"] = tuple(knowledge_bases)
    return AgentConfig.model_validate(fields)
