"""`ragline memory add|list|search|delete`: a caller's long-term memories from the command line.

Uses the store the settings choose (RAGLINE_MEMORY_STORE: sqlite under the data dir by default),
through the same services container every host builds, so what is added here is recalled in answers.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from ragline.commands.running import FAILED, run, say_error

if TYPE_CHECKING:  # the memory service imports LangGraph's store: loaded when a command runs
    from ragline.memory.service import Caller, MemoryService


def _service(with_embedder: bool = False) -> MemoryService:
    from ragline.memory.service import MemoryService
    from ragline.services import Services

    services = Services.from_settings()
    return MemoryService(services.memory_store, services.embedder if with_embedder else None)


def _caller(args: argparse.Namespace) -> Caller:
    from ragline.memory.service import Caller

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
        say_error(f"no memory {args.id} (see `ragline memory list`)")
        return FAILED
    return 0


def _run(handler: Callable[[argparse.Namespace], Coroutine[Any, Any, int]]) -> Callable[[argparse.Namespace], int]:
    def command(args: argparse.Namespace) -> int:
        from ragline.memory.store import MemoryStoreError

        try:
            return run(handler(args))
        except (MemoryStoreError, ValueError, OSError) as exc:
            say_error(str(exc))
            return FAILED

    return command


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
