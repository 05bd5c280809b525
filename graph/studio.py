"""The graphs `langgraph dev` serves to LangGraph Studio (named in langgraph.json).

Studio's run context is JSON, so it cannot carry the services: this module is the composition
root of that host. It builds one `Services` from settings (the environment, or langgraph.json's
`.env`) and binds it to every graph; stores and models still open only on first use.
"""

from __future__ import annotations

from ragline.graph.agent import build_agent_graph
from ragline.graph.graphs import build_graph
from ragline.services import Services

services = Services.from_settings()

ragline = build_graph("ragline", services=services)
ragline_chat = build_graph("ragline_chat", services=services)
chat = build_graph("chat", services=services)
chat_stream = build_graph("chat_stream", services=services)
chat_history_stream = build_graph("chat_history_stream", services=services)
rag = build_graph("rag", services=services)
rag_stream = build_graph("rag_stream", services=services)
ragline_agent = build_agent_graph(services=services)  # agent mode: needs a chat model with tool calling
