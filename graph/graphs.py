"""The compiled graphs that langgraph.json names (Studio, `langgraph dev`, embedding).

`ragline` is the dynamic pipeline (pure chat or RAG per request); the others are the seed's
static presets. Hosts that need a checkpointer compile their own with `build_graph`.
"""

from __future__ import annotations

from typing import Any

from langgraph.graph.state import CompiledStateGraph

from ragline.graph.builder import PRESETS, compile_pipeline, dynamic_pipeline


def build_graph(preset: str = "ragline", *, checkpointer: Any = None, store: Any = None) -> CompiledStateGraph:
    """A compiled pipeline; `store` (a LangGraph BaseStore) turns long-term memory recall on."""
    if preset == "ragline":
        return compile_pipeline(dynamic_pipeline(), checkpointer=checkpointer, store=store)
    if preset not in PRESETS:
        raise ValueError(f"unknown pipeline {preset!r}; choose ragline or one of {', '.join(PRESETS)}")
    return compile_pipeline(PRESETS[preset](), checkpointer=checkpointer, store=store, name=preset)


ragline = build_graph("ragline")
chat = build_graph("chat")
chat_stream = build_graph("chat_stream")
chat_history_stream = build_graph("chat_history_stream")
rag = build_graph("rag")
rag_stream = build_graph("rag_stream")
