"""How every `ragline` command runs: one event loop, errors in one style, Ctrl-C within a second.

Errors print as one line, `ragline: error: <what happened and what to do>`, in our words (see
ragline/plain_errors.py), never a traceback. Ctrl-C cancels the command's coroutine, so its own
cleanup runs (a document being stored is finished or rolled back, never half kept, and sessions
close); then the process ends at once. asyncio.run would instead wait for the worker threads,
and a model call already computing there runs on for many seconds.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Coroutine
from typing import Any, NoReturn, TypeVar

T = TypeVar("T")
INTERRUPTED = 130  # the shell's code for a process ended by SIGINT
USER_ERROR = 2  # bad input or a missing thing the user named (argparse uses 2 too)
FAILED = 1  # the work itself failed


class CLIError(Exception):
    """A problem the user can fix; printed as one line."""


def say_error(message: str) -> None:
    print(f"ragline: error: {message}", file=sys.stderr, flush=True)


def describe_failure(exc: Exception) -> str:
    """The failure's message, with where to look next when the user named something that is not there."""
    from ragline.retrieval.errors import KnowledgeBaseNotFoundError

    if isinstance(exc, KnowledgeBaseNotFoundError):
        return f"{exc} (see `ragline kb list`; `ragline kb create NAME` makes one)"
    return str(exc)


def run(main: Coroutine[Any, Any, T]) -> T:
    """The command's coroutine to its end; on Ctrl-C, its cleanup and then an immediate exit."""
    runner = asyncio.Runner()
    try:
        result = runner.run(main)
    except KeyboardInterrupt:
        end_interrupted()
    runner.close()
    return result


def end_interrupted() -> NoReturn:
    print("ragline: interrupted", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(INTERRUPTED)  # the stores are committed or rolled back by now; threads still computing are dropped


def split_names(text: str) -> list[str]:
    """Comma-separated names (users, groups), blanks dropped."""
    return [name.strip() for name in text.split(",") if name.strip()]
