"""An MCP server built with the official SDK, for the tests of Ragline's MCP client and agent
mode's MCP tools (`python tests/mcp_orders.py stdio`, or `... http PORT`), and how tests start it:
`served_over_http()` on a free loopback port, `over_stdio()`, each as a settings entry."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from ragline.settings import McpServer

SHIPPED = {"A-42": "Order A-42 shipped on 3 May 2026 with Nordpost, parcel NP-7781.", "B-7": "Order B-7 waits for payment."}


def build_server() -> MCPServer:
    """The server (built only in its own process: MCPServer() configures the root logger)."""
    server = MCPServer("orders", log_level="WARNING")

    @server.tool()
    def lookup_order(order_id: str) -> str:
        """Where an order is: its shipping state and parcel number."""
        if order_id not in SHIPPED:
            raise ToolError(f"no order {order_id}")
        return SHIPPED[order_id]

    @server.tool()
    def cancel_order(order_id: str, reason: str = "") -> str:
        """Cancel an order that has not shipped."""
        return f"Order {order_id} cancelled{': ' + reason if reason else ''}."

    @server.tool()
    def slow(seconds: float) -> str:
        """Wait, then answer (for timeouts)."""
        time.sleep(seconds)
        return "done"

    @server.tool()
    def huge() -> str:
        """A result far larger than a model should read."""
        return "x" * 50_000

    return server


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_port(process: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        assert process.poll() is None, "the MCP server exited"
        time.sleep(0.1)


@contextmanager
def served_over_http() -> Iterator[McpServer]:
    """The server in a process of its own, speaking streamable HTTP on a free loopback port."""
    port = _free_port()
    process = subprocess.Popen([sys.executable, __file__, "http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_port(process, port)
        yield McpServer(transport="streamable_http", url=f"http://127.0.0.1:{port}/mcp", timeout_s=10)
    finally:
        process.terminate()
        process.wait(10)


def over_stdio() -> McpServer:
    """The server as a command Ragline starts for each session (stdio)."""
    return McpServer(transport="stdio", command=sys.executable, args=[str(Path(__file__).resolve()), "stdio"], timeout_s=20)


if __name__ == "__main__":
    server = build_server()
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]), stateless_http=True)
