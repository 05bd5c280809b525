"""`ragline mcp`: Ragline's MCP tools over stdio, for Claude Desktop, Cursor and other MCP clients.

The client starts this command and speaks MCP on its stdin and stdout (logs go to stderr). The
tools and their limits are those of /mcp on `ragline serve` (api/mcp.py), over the same services
a `ragline serve` builds from the same settings (RAGLINE_*: data directory, models, Redis).

Who calls: with API keys configured (RAGLINE_API_KEYS / RAGLINE_API_KEYS_FILE), the command needs
one of them (--api-key, or RAGLINE_MCP_API_KEY so it stays out of the process list), and every
tool acts as that key's tenant; with none configured, as the dev tenant "default".
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from ragline.settings import Settings

KEY_ENV = "RAGLINE_MCP_API_KEY"


async def serve_stdio(settings: Settings, key: str | None) -> None:
    from ragline.api.auth import KeyRing
    from ragline.api.host import open_host
    from ragline.api.mcp import Caller, build_server, stdio_principal
    from ragline.services import Services

    who = stdio_principal(KeyRing.from_settings(settings), key)  # refused before anything opens
    async with open_host(Services.from_settings(settings)) as svc:
        server = build_server(lambda ctx: Caller(svc, who))
        await server.run_stdio_async()


def run(args: argparse.Namespace) -> int:
    from ragline.api.errors import Unauthorized
    from ragline.logs import configure
    from ragline.settings import get_settings

    configure(args.log_level, json_lines=args.log_format == "json")  # stderr: stdout is the protocol's
    try:
        asyncio.run(serve_stdio(get_settings(), args.api_key or os.environ.get(KEY_ENV) or None))
    except Unauthorized as exc:
        print(f"ragline mcp: {exc.message}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:  # a bad keys file among them
        print(f"ragline mcp: {exc}", file=sys.stderr)
        return 2
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("mcp", help="serve the MCP tools (search, ask, list, read) over stdio")
    parser.add_argument("--api-key", help=f"the API key whose tenant the tools act as (default: ${KEY_ENV}); needed when keys are configured")
    parser.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"])
    parser.add_argument("--log-format", default="json", choices=["json", "text"])
    parser.set_defaults(func=run)
