"""The tools of the MCP servers an assistant names, as agent tools (seed: the agent's MCP tools).

Each server is one the operator allows (settings agent_mcp_servers, ragline/mcp_client); the model
calls its tools as <server>__<tool>. What a tool returns is text the model reads (not a passage to
cite); a tool that reports an error, or a server that cannot be reached, answers the call with
that error and the loop goes on. A server that cannot list its tools is left out of the turn; one
that needs the user's authorization first (MCP OAuth) is named, with the link, for the turn to
ask (nodes/agent/authorize.py).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ragline import defaults
from ragline.mcp_client.client import McpServerError, RemoteTool
from ragline.mcp_client.oauth import AuthorizationRequired, McpUser
from ragline.nodes.tools.base import AgentTool, ToolContext, ToolOutcome

log = logging.getLogger(__name__)


class McpToolError(RuntimeError):
    """The MCP tool ran and reported an error (its result's isError)."""


def remote_agent_tool(tool: RemoteTool) -> AgentTool:
    async def run(arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
        result = await context.services.mcp.call(tool.server, tool.name, arguments, McpUser(context.tenant_id, context.user_id))
        if result.is_error:
            raise McpToolError(result.text or "the tool reported an error")
        text = result.text or "(the tool returned nothing)"
        return ToolOutcome(text, text[: defaults.AGENT_RESULT_SUMMARY_CHARS])

    description = f"[{tool.server}] {tool.description}".strip()
    return AgentTool(name=tool.qualified_name, description=description, parameters=tool.input_schema, run=run)


async def mcp_tools(services: Any, servers: Sequence[str], user: McpUser) -> tuple[list[AgentTool], list[AuthorizationRequired]]:
    """The tools of the turn's MCP servers that the tenant may use and that answer their listing,
    and the servers that first need the user's authorization."""
    found: list[AgentTool] = []
    unauthorized: list[AuthorizationRequired] = []
    for server in servers:
        if not services.mcp.allowed(server, user.tenant_id):
            log.warning("MCP server %r is not allowed for tenant %r (any more): its tools are not offered", server, user.tenant_id)
            continue
        try:
            found += [remote_agent_tool(tool) for tool in await services.mcp.tools(server, user)]
        except AuthorizationRequired as needed:
            unauthorized.append(needed)
        except McpServerError as exc:
            log.warning("%s; its tools are not offered this round", exc)
    return found, unauthorized
