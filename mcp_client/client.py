"""Connect to an allowed MCP server with the official SDK, list its tools, run one.

Each listing and each call opens its own session (streamable HTTP, or a stdio process started for
it) and closes it: nothing stays open between the rounds of a turn, or between turns, and a server
that restarts is simply found again. A server's tool list is reused for AGENT_MCP_TOOLS_TTL_S, so a
turn's rounds do not list it each time (per user for a server marked `oauth`, whose sessions carry
the user's token: mcp_client/oauth.py; without one, AuthorizationRequired says where to get it). Every wait is bounded by the server's timeout_s, and every
size the model reads (tools, their schemas, a result) by defaults.AGENT_MCP_*.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from ragline import defaults
from ragline.mcp_client.names import qualified
from ragline.mcp_client.oauth import AuthorizationRequired, McpUser, OAuthFlows
from ragline.settings import McpServer

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what OpenAI-style function names allow


class McpServerError(RuntimeError):
    """A server that is not allowed, cannot be reached, or failed a request."""


@dataclass(frozen=True)
class RemoteTool:
    server: str
    name: str  # the server's own name for it
    description: str
    input_schema: dict[str, Any]

    @property
    def qualified_name(self) -> str:
        """The name the model calls it by (mcp_client/names.py)."""
        return qualified(self.server, self.name)


@dataclass(frozen=True)
class ToolResult:
    text: str
    is_error: bool


def _reason(exc: BaseException) -> str:
    """The first real cause inside the SDK's exception groups, as one line."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:300]


def _offerable(server: str, tool: Any) -> RemoteTool | None:
    """The server's tool as the model may be offered it, or None when its name or size does not fit."""
    found = RemoteTool(server, tool.name, (tool.description or tool.title or "").strip(), dict(tool.input_schema or {"type": "object"}))
    size = len(found.description) + len(json.dumps(found.input_schema))
    return found if _TOOL_NAME.match(found.qualified_name) and size <= defaults.AGENT_MCP_SCHEMA_CHARS else None


def _text_of(result: Any) -> str:
    """A call's content as text: its text blocks, else its structured content as JSON; other
    blocks (images, audio, resources) are named, not read."""
    parts = [block.text if getattr(block, "type", "") == "text" else f"[{getattr(block, 'type', 'content')} not shown]" for block in result.content]
    text = "\n".join(parts).strip()
    if not text and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False)
    limit = defaults.AGENT_MCP_RESULT_CHARS
    return text if len(text) <= limit else text[:limit] + f"\n[cut: the result had {len(text)} characters, {limit} are shown]"


class McpClient:
    """The allowed servers (settings agent_mcp_servers) and their cached tool lists."""

    def __init__(self, servers: dict[str, McpServer], tools_ttl_s: float = defaults.AGENT_MCP_TOOLS_TTL_S,
                 oauth: OAuthFlows | None = None) -> None:
        self.servers = servers
        self.tools_ttl_s = tools_ttl_s
        self.oauth = oauth
        self._listed: dict[tuple[str, McpUser | None], tuple[float, list[RemoteTool]]] = {}

    def allowed(self, name: str, tenant_id: str) -> bool:
        server = self.servers.get(name)
        return server is not None and (not server.tenants or tenant_id in server.tenants)

    def _server(self, name: str) -> McpServer:
        server = self.servers.get(name)
        if server is None:
            raise McpServerError(f"no MCP server {name!r} is configured (settings agent_mcp_servers)")
        return server

    def needs_user(self, name: str) -> bool:
        """Whether the server is reached with each user's own token (MCP OAuth)."""
        server = self.servers.get(name)
        return server is not None and server.oauth

    @asynccontextmanager
    async def _session(self, name: str, server: McpServer, user: McpUser | None) -> AsyncIterator[ClientSession]:
        raise_if_paused = None
        if server.transport == "stdio":
            transport = stdio_client(StdioServerParameters(command=server.command or "", args=server.args, env=server.env or None))
        else:
            auth = None
            if server.oauth:
                if self.oauth is None or user is None:
                    raise McpServerError(f"MCP server {name!r} needs a user's authorization, and this host cannot ask for it")
                auth, raise_if_paused = self.oauth.auth(name, server.url or "", user, server.oauth_scope)
            transport = streamable_http_client(server.url or "", http_client=create_mcp_http_client(headers=server.headers, auth=auth))
        try:
            async with transport as (read, write), ClientSession(read, write, read_timeout_seconds=server.timeout_s) as session:
                await session.initialize()
                yield session
        except Exception:
            if raise_if_paused is not None:
                await raise_if_paused()  # the user's authorization, not a failure of the server
            raise

    def _user(self, server: McpServer, user: McpUser | None) -> McpUser | None:
        return user if server.oauth else None

    async def tools(self, name: str, user: McpUser | None = None) -> list[RemoteTool]:
        """The server's tools (at most AGENT_MCP_MAX_TOOLS), listed at most once per tools_ttl_s
        (per user for an `oauth` server, which raises AuthorizationRequired until the user grants access)."""
        server = self._server(name)
        cache_key = (name, self._user(server, user))
        listed = self._listed.get(cache_key)
        if listed is not None and time.monotonic() - listed[0] < self.tools_ttl_s:
            return listed[1]
        try:
            with anyio.fail_after(server.timeout_s):
                async with self._session(name, server, cache_key[1]) as session:
                    result = await session.list_tools()
        except AuthorizationRequired:
            raise
        except Exception as exc:
            raise McpServerError(f"MCP server {name!r} could not list its tools: {_reason(exc)}") from None
        found = [tool for tool in (_offerable(name, t) for t in result.tools) if tool is not None][: defaults.AGENT_MCP_MAX_TOOLS]
        self._listed[cache_key] = (time.monotonic(), found)
        return found

    async def call(self, name: str, tool: str, arguments: dict[str, Any], user: McpUser | None = None) -> ToolResult:
        """Run one tool of the server; a failure to reach it raises McpServerError (AuthorizationRequired
        when the user's access to an `oauth` server is gone), a tool that reports an error returns it (is_error)."""
        server = self._server(name)
        try:
            with anyio.fail_after(server.timeout_s):
                async with self._session(name, server, self._user(server, user)) as session:
                    result = await session.call_tool(tool, arguments)
        except AuthorizationRequired:
            raise
        except TimeoutError:
            raise McpServerError(f"MCP server {name!r} did not answer {tool} within {server.timeout_s:g} s") from None
        except Exception as exc:
            raise McpServerError(f"MCP server {name!r} failed {tool}: {_reason(exc)}") from None
        return ToolResult(_text_of(result), bool(result.is_error))
