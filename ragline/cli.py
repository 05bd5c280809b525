"""The `ragline` command: ask a question, or chat, from the terminal.

`ragline ask "question"` streams one answer (thinking dimmed, answer plain); `ragline chat` keeps a
multi-turn session, stored in the data directory so it can be continued later with --session.
Errors are one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any, TextIO

from pydantic import ValidationError

from ragline.graph.events import ResponseType, StreamResponse
from ragline.services import Services

DIM, RESET = "\033[2m", "\033[0m"
STARTED_AT = time.time()  # as early as the command can see: for `ask --timings`


class CLIError(Exception):
    """A problem the user can fix; printed as one line."""


def _request_fields(args: argparse.Namespace, query: str, kb_ids: list[str]) -> dict:
    fields: dict = {"query": query}
    if args.model:
        fields["chat_model"] = args.model
    if args.max_tokens:
        fields["summary"] = {"max_tokens": args.max_tokens}
    if kb_ids:
        fields["knowledge_base_ids"] = tuple(kb_ids)
    return fields


def _progress(label: str):
    def report(done: int, total: int) -> None:
        if total:
            end = "\n" if done >= total else ""
            print(f"\r{label}: {done}/{total}", end=end, file=sys.stderr, flush=True)

    return report


async def resolve_knowledge_bases(args: argparse.Namespace, services: Services) -> list[str]:
    """Ids of the --kb names (or ids), plus the bundled sample base with --sample (indexed on first use)."""
    names = list(getattr(args, "kb", None) or [])
    if not names and not getattr(args, "sample", False):
        return []
    from ragline.retrieval.errors import RetrievalError

    stack = await asyncio.to_thread(lambda: services.retrieval)  # opens Chroma: off the event loop
    try:
        ids = [stack.knowledge_bases.resolve(name, args.tenant).id for name in names]
    except RetrievalError as exc:
        raise CLIError(str(exc)) from None
    if getattr(args, "sample", False):
        from ragline.ingestion.sample import ensure_sample_kb

        ids.append((await ensure_sample_kb(stack, args.tenant, progress=_progress("indexing the sample knowledge base"))).id)
    return ids


UNSEARCHED_NOTE = "(no knowledge base was searched: this answer is the model's own, not from your documents; add --kb NAME or --sample)"
_KB_TAG = re.compile(r"<(kb|web)\b([^>]*)/>")
_ATTRIBUTE = re.compile(r'(\w+)="([^"]*)"')


class TerminalPrinter:
    """Renders events: thinking dimmed, answer plain, citations as [n] with their sources listed
    after the answer, errors on stderr. A source Ragline matched to a sentence the model left
    uncited (`attributed="true"`) prints as [n~], and is listed as matched unless the model cited
    it elsewhere."""

    def __init__(self, out: TextIO, err: TextIO, color: bool, *, searched: bool = True) -> None:
        self.out, self.err, self.color = out, err, color
        self.searched = searched  # False: no knowledge base was chosen, so the answer is the model's alone
        self._in_thinking = False
        self.failed = False
        self.cited: dict[str, str] = {}  # chunk id or url -> label shown under the answer
        self.model_cited: set[str] = set()  # ...of which the model itself cited these

    def _footnote(self, match: re.Match[str]) -> str:
        attributes = dict(_ATTRIBUTE.findall(match.group(2)))
        key = attributes.get("chunk_id") or attributes.get("url") or match.group(0)
        if key not in self.cited:
            self.cited[key] = attributes.get("title") or attributes.get("url") or key
        number = list(self.cited).index(key) + 1
        if attributes.get("attributed") == "true":
            return f"[{number}~]"
        self.model_cited.add(key)
        return f"[{number}]"

    def _sources(self) -> str:
        if not self.cited:
            return ""
        return "\n" + "\n".join(
            f"[{n}] {label}" + ("" if key in self.model_cited else " (matched by Ragline, not cited by the model)")
            for n, (key, label) in enumerate(self.cited.items(), start=1)
        )

    def __call__(self, event: StreamResponse) -> None:
        kind = event.response_type
        if kind == ResponseType.THINKING and event.content:
            if not self._in_thinking and self.color:
                self.out.write(DIM)
            self._in_thinking = True
            self.out.write(event.content)
        elif kind == ResponseType.ANSWER:
            self._end_thinking()
            self.out.write(_KB_TAG.sub(self._footnote, event.content))
            if event.done and (event.data or {}).get("truncated"):
                self.err.write("\n[answer truncated by the output limit]")
        elif kind == ResponseType.ERROR:
            self._end_thinking()
            self.failed = True
            self.err.write(f"\nerror: {event.content}\n")
        elif kind == ResponseType.COMPLETE:
            self._end_thinking()
            self.out.write(self._sources() + "\n")
            if not self.searched and not self.failed:
                self.out.flush()
                self.err.write(UNSEARCHED_NOTE + "\n")
        self.out.flush()

    def _end_thinking(self) -> None:
        if self._in_thinking:
            self.out.write(RESET + "\n" if self.color else "\n")
            self._in_thinking = False


async def _ask(args: argparse.Namespace, graph: Any, services: Services, query: str, session_id: str, kb_ids: list[str]) -> bool:
    from ragline.graph.context import RunContext
    from ragline.graph.request import PipelineRequest
    from ragline.graph.turn import stream_turn

    try:
        request = PipelineRequest(**_request_fields(args, query, kb_ids))
    except ValidationError as exc:
        raise CLIError(exc.errors()[0]["msg"]) from None
    printer = TerminalPrinter(sys.stdout, sys.stderr, color=sys.stdout.isatty(), searched=bool(kb_ids))
    context = RunContext(session_id=session_id, tenant_id=args.tenant, user_id=args.user, services=services)
    asked_at, first_token, completed = time.time(), None, None
    async for event in stream_turn(graph, request, context):
        printer(event)
        if event.response_type == ResponseType.ANSWER and event.content and first_token is None:
            first_token = time.time()
        elif event.response_type == ResponseType.COMPLETE:
            completed = time.time()
    if getattr(args, "timings", False):
        print(_timings(asked_at, first_token, completed), file=sys.stderr)
    return not printer.failed


def _timings(asked_at: float, first_token: float | None, completed: float | None) -> str:
    """One line of where the time went, in seconds since the command started (and model-call figures)."""
    from ragline.models.local_engine import recent_calls

    def since(moment: float | None) -> str:
        return f"{moment - STARTED_AT:.2f}" if moment else "-"

    parts = [f"question asked {since(asked_at)}"]
    calls = [c for c in recent_calls() if c.called_at >= asked_at]
    if calls:
        parts.append(f"first model call {since(calls[0].called_at)}")
        parts.append(f"model calls {len(calls)}, answer prompt {calls[-1].prompt_tokens} tokens ({calls[-1].cached_tokens} cached)")
    parts += [f"first answer token {since(first_token)}", f"complete {since(completed)}"]
    return "timings (s since start): " + "; ".join(parts) + f" [started_at={STARTED_AT:.3f}]"


def _graph(args: argparse.Namespace, saver: object) -> Any:
    from ragline.graph.graphs import build_graph

    try:
        return build_graph(args.pipeline, checkpointer=saver)
    except ValueError as exc:
        raise CLIError(str(exc)) from None


async def _run_ask(args: argparse.Namespace) -> int:
    from ragline.checkpoints.savers import memory_saver

    services = Services.from_settings()
    try:
        kb_ids = await resolve_knowledge_bases(args, services)
        ok = await _ask(args, _graph(args, memory_saver()), services, " ".join(args.question), str(uuid.uuid4()), kb_ids)
    finally:
        await services.aclose()
    return 0 if ok else 1


async def _run_chat(args: argparse.Namespace) -> int:
    from ragline.checkpoints.savers import sqlite_saver

    services = Services.from_settings()
    session_id = args.session or str(uuid.uuid4())
    try:
        kb_ids = await resolve_knowledge_bases(args, services)
        async with sqlite_saver(services.settings.data_dir / "sessions.sqlite") as saver:
            graph = _graph(args, saver)
            print(f"session {session_id} (continue later with --session {session_id}); empty line or Ctrl-D quits")
            while True:
                try:
                    line = await asyncio.to_thread(input, "> ")
                except EOFError:
                    break
                if not line.strip():
                    break
                await _ask(args, graph, services, line, session_id, kb_ids)
    finally:
        await services.aclose()
    return 0


def _add_model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="litellm chat model (default: the local model, or RAGLINE_CHAT_MODEL)")
    parser.add_argument("--max-tokens", type=int, help="upper bound on answer tokens")
    parser.add_argument("--pipeline", default="ragline", help="graph to run: ragline (default), chat, chat_stream, rag_stream ...")
    parser.add_argument("--kb", action="append", metavar="NAME", help="answer from this knowledge base (repeatable)")
    parser.add_argument("--sample", action="store_true", help="answer from the bundled sample knowledge base")
    parser.add_argument("--tenant", default="default", help="tenant whose knowledge bases and memories are used")
    parser.add_argument("--user", default="default", help="user whose long-term memories are recalled")
    parser.add_argument("--timings", action="store_true", help="print where the time went (start-up, model calls, first token) on stderr")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragline", description="Knowledge question answering as a LangGraph graph.")
    sub = parser.add_subparsers(dest="command", required=True)
    ask = sub.add_parser("ask", help="answer one question, streamed")
    ask.add_argument("question", nargs="+", help="the question")
    _add_model_options(ask)
    ask.set_defaults(func=lambda a: asyncio.run(_run_ask(a)))
    chat = sub.add_parser("chat", help="a multi-turn conversation in the terminal")
    chat.add_argument("--session", help="continue this session id")
    _add_model_options(chat)
    chat.set_defaults(func=lambda a: asyncio.run(_run_chat(a)))
    from ragline.commands import kb, memory

    kb.register(sub)
    memory.register(sub)
    from ragline.commands import serve, worker

    serve.register(sub)
    worker.register(sub)
    from ragline.commands import mcp

    mcp.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except CLIError as exc:
        print(f"ragline: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a last line of defence: one line, not a traceback
        print(f"ragline: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
