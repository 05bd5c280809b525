"""`ragline memory add|list|search|delete`: a caller's long-term memories from the command line.

Uses the store the settings choose (RAGLINE_MEMORY_STORE: sqlite under the data dir by default),
through the same services container every host builds, so what is added here is recalled in answers.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable

from ragline.memory.service import Caller, MemoryService
from ragline.memory.store import MemoryStoreError
from ragline.services import Services


def _service(with_embedder: bool = False) -> MemoryService:
    services = Services.from_settings()
    return MemoryService(services.memory_store, services.embedder if with_embedder else None)


def _caller(args: argparse.Namespace) -> Caller:
    return Caller(args.tenant, args.user)


async def memory_add(args: argparse.Namespace) -> int:
    memory = await _service().add(_caller(args), " ".join(args.text))
    print(memory.id)
    return 0


async def memory_list(args: argparse.Namespace) -> int:
    for memory in await _service().list(_caller(args), limit=args.limit):
        print(f"{memory.id}  {memory.created_at:%Y-%m-%d %H:%M}  {memory.text}")
    return 0


async def memory_search(args: argparse.Namespace) -> int:
    for memory in await _service(with_embedder=True).search(_caller(args), " ".join(args.query), limit=args.limit):
        print(f"{memory.score or 0:.3f}  {memory.id}  {memory.text}")
    return 0


async def memory_delete(args: argparse.Namespace) -> int:
    if not await _service().delete(_caller(args), args.id):
        print(f"error: no memory {args.id}", file=sys.stderr)
        return 1
    return 0


def _run(handler: Callable[[argparse.Namespace], Awaitable[int]]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return asyncio.run(handler(args))
        except (MemoryStoreError, ValueError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1

    return run


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `memory` to the ragline command."""
    caller = argparse.ArgumentParser(add_help=False)
    caller.add_argument("--tenant", default="default", help="tenant of the caller")
    caller.add_argument("--user", default="default", help="user of the caller")
    memory = subparsers.add_parser("memory", help="add, list, search or delete long-term memories")
    sub = memory.add_subparsers(dest="memory_command", required=True)
    add = sub.add_parser("add", parents=[caller], help="remember something about the caller")
    add.add_argument("text", nargs="+")
    add.set_defaults(func=_run(memory_add))
    listing = sub.add_parser("list", parents=[caller], help="the caller's memories, newest first")
    listing.add_argument("--limit", type=int, default=100)
    listing.set_defaults(func=_run(memory_list))
    search = sub.add_parser("search", parents=[caller], help="the memories closest to a question")
    search.add_argument("query", nargs="+")
    search.add_argument("--limit", type=int, default=5)
    search.set_defaults(func=_run(memory_search))
    delete = sub.add_parser("delete", parents=[caller], help="forget one memory")
    delete.add_argument("id")
    delete.set_defaults(func=_run(memory_delete))
