"""Agent mode's tools (graph/agent.py): one module each, all behind `AgentTool`.

`TOOLS` names every tool the agent graph can offer; an assistant narrows them (its `tools`).
"""

from __future__ import annotations

from ragline.nodes.tools.base import AgentTool, ToolContext, ToolOutcome
from ragline.nodes.tools.read_chunks import READ_CHUNKS
from ragline.nodes.tools.search_knowledge import SEARCH_KNOWLEDGE

TOOLS: dict[str, AgentTool] = {tool.name: tool for tool in (SEARCH_KNOWLEDGE, READ_CHUNKS)}

__all__ = ["TOOLS", "AgentTool", "ToolContext", "ToolOutcome"]
