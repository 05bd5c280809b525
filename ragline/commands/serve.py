"""`ragline serve`: the HTTP service (Starlette under uvicorn).

Settings come from the environment (RAGLINE_*): RAGLINE_REDIS_URL switches checkpoints, event
streams and runs to Redis so that several replicas share them; RAGLINE_API_KEYS or
RAGLINE_API_KEYS_FILE map API keys to tenants. With no key configured the service runs in dev
mode (one tenant, no key needed) and refuses to listen beyond loopback unless --insecure-dev.
"""

from __future__ import annotations

import argparse
import ipaddress
import sys


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from ragline.api.app import create_app
    from ragline.api.auth import KeyRing
    from ragline.settings import get_settings

    settings = get_settings()
    host = args.host or settings.host
    port = args.port or settings.port
    try:
        keyring = KeyRing.from_settings(settings)
    except (OSError, ValueError) as exc:
        print(f"ragline serve: bad API key settings: {exc}", file=sys.stderr)
        return 2
    if keyring.dev_mode:
        if not _is_loopback(host) and not args.insecure_dev:
            print(
                f"ragline serve: no API keys configured (RAGLINE_API_KEYS / RAGLINE_API_KEYS_FILE); refusing to listen "
                f"on {host} without them. Configure keys, bind 127.0.0.1, or pass --insecure-dev.",
                file=sys.stderr,
            )
            return 2
        print("ragline serve: dev mode, no API keys: every request acts as tenant 'default'", file=sys.stderr)
    uvicorn.run(
        create_app(settings),
        host=host,
        port=port,
        log_level=args.log_level,
        timeout_graceful_shutdown=3,  # open SSE streams must not hold a restart for long
    )
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("serve", help="run the HTTP service: sessions, SSE answers, knowledge bases")
    parser.add_argument("--host", help="address to listen on (default: RAGLINE_HOST or 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port (default: RAGLINE_PORT or 8000)")
    parser.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    parser.add_argument("--insecure-dev", action="store_true", help="allow dev mode (no API keys) on a non-loopback address")
    parser.set_defaults(func=run)
