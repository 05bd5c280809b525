"""Agent mode's tools (graph/agent.py): one module each, all behind `AgentTool`.

`TOOLS` names every tool the agent graph can offer; an assistant narrows them (its `tools`). An
assistant that names none is offered `DEFAULT_TOOLS`: those that stay inside the service (the web
tools send the question out, so an assistant must name them). MCP servers' tools come from
nodes/tools/mcp.py.
"""

from __future__ import annotations

from ragline.nodes.tools.base import AgentTool, ToolContext, ToolOutcome
from ragline.nodes.tools.data_analysis import DATA_ANALYSIS
from ragline.nodes.tools.entity_lookup import ENTITY_LOOKUP
from ragline.nodes.tools.read_chunks import READ_CHUNKS
from ragline.nodes.tools.search_knowledge import SEARCH_KNOWLEDGE
from ragline.nodes.tools.web_fetch import WEB_FETCH
from ragline.nodes.tools.web_search import WEB_SEARCH

TOOLS: dict[str, AgentTool] = {tool.name: tool for tool in (SEARCH_KNOWLEDGE, READ_CHUNKS, DATA_ANALYSIS, ENTITY_LOOKUP, WEB_SEARCH, WEB_FETCH)}
DEFAULT_TOOLS = ("search_knowledge", "read_chunks", "data_analysis", "entity_lookup")

__all__ = ["DEFAULT_TOOLS", "TOOLS", "AgentTool", "ToolContext", "ToolOutcome"]
