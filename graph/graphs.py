"""The named graphs: `ragline` (dynamic: pure chat or RAG per request) and the seed's presets.

Hosts compile their own with `build_graph`, giving the checkpointer they use and, when their run
context cannot carry objects (Studio, a parent graph), the services to fall back on.
"""

from __future__ import annotations

from typing import Any

from ragline.graph.builder import PRESETS, Graph, compile_pipeline, dynamic_pipeline

GRAPH_NAMES = ("ragline", *PRESETS)


def build_graph(preset: str = "ragline", *, checkpointer: Any = None, services: Any = None) -> Graph:
    """A compiled pipeline. `services` (ragline.services.Services) serves runs whose context has none."""
    if preset == "ragline":
        return compile_pipeline(dynamic_pipeline(), checkpointer=checkpointer, services=services)
    if preset not in PRESETS:
        raise ValueError(f"unknown pipeline {preset!r}; choose ragline or one of {', '.join(PRESETS)}")
    return compile_pipeline(PRESETS[preset](), checkpointer=checkpointer, services=services, name=preset)
