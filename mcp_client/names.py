"""How the model names an MCP server's tool: <server>__<tool> (server names hold no "_")."""

from __future__ import annotations

SEPARATOR = "__"


def qualified(server: str, tool: str) -> str:
    return f"{server}{SEPARATOR}{tool}"


def split_name(name: str) -> tuple[str, str]:
    """(server, tool) of a qualified tool name; ("", name) for a name that is not an MCP tool's."""
    server, separator, tool = name.partition(SEPARATOR)
    return (server, tool) if separator and server and tool else ("", name)
