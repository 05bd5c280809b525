"""The `ragline` command: its subcommands, and the one place a failure becomes a line on stderr.

Building the parser imports only what the arguments need (argparse, the settings' defaults): each
command imports the graph, the stores and the models when it runs, after it has checked what it
was given. Errors are one line, `ragline: error: ...`, and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from ragline.commands.running import FAILED, USER_ERROR, CLIError, end_interrupted, say_error


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors in the same style as every other error of the command."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        say_error(f"{message} (see `{self.prog} --help`)")
        sys.exit(USER_ERROR)


def build_parser() -> argparse.ArgumentParser:
    from ragline.commands import access, ask, assistants, kb, mcp, memory, serve, worker

    parser = _Parser(prog="ragline", description="Knowledge question answering as a LangGraph graph.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    ask.register(sub)
    kb.register(sub)
    access.register(sub)
    memory.register(sub)
    assistants.register(sub)
    serve.register(sub)
    worker.register(sub)
    mcp.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except CLIError as exc:
        say_error(str(exc))
        return USER_ERROR
    except KeyboardInterrupt:  # outside a command's event loop (which ends the process itself)
        end_interrupted()
    except Exception as exc:  # a last line of defence: one line, not a traceback
        say_error(f"{type(exc).__name__}: {exc}")
        return FAILED


if __name__ == "__main__":
    sys.exit(main())
