"""`ragline ask "question"` streams one answer; `ragline chat` keeps a multi-turn session, stored in
the data directory so it can be continued later with --session.

What the user gave is checked first (the question, the knowledge base names), before the stores
and the model open, so a mistake is reported in well under a second.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from typing import TYPE_CHECKING, Any

from ragline.commands.running import CLIError, describe_failure, run, split_names

if TYPE_CHECKING:
    from ragline.contracts.request import PipelineRequest
    from ragline.models.local_engine import CallStats
    from ragline.services import Services

OPTION_NAMES = {"query": "the question", "summary.max_tokens": "--max-tokens", "chat_model": "--model"}
STARTED_AT = time.time()  # as early as the command can see: for `ask --timings`


def _fields(args: argparse.Namespace, query: str, kb_ids: list[str]) -> dict[str, Any]:
    """The settings the command line sets itself."""
    if not query.strip():
        raise CLIError("the question is empty: ragline ask \"your question\"")
    fields: dict[str, Any] = {"query": query}
    if args.model:
        fields["chat_model"] = args.model
    if args.max_tokens is not None:  # 0 is a value to refuse, not "unset"
        fields["summary"] = {"max_tokens": args.max_tokens}
    if kb_ids:
        fields["knowledge_base_ids"] = tuple(kb_ids)
    return fields


def _request(args: argparse.Namespace, query: str, kb_ids: list[str]) -> PipelineRequest:
    from pydantic import ValidationError

    from ragline.contracts.request import PipelineRequest
    from ragline.plain_errors import validation_message

    try:
        return PipelineRequest(**_fields(args, query, kb_ids))
    except ValidationError as exc:
        raise CLIError(validation_message(exc, limit=1, names=OPTION_NAMES)) from None


async def _assistant_turn(args: argparse.Namespace, services: Services, query: str, kb_ids: list[str]) -> tuple[PipelineRequest, dict[str, Any]]:
    """With --assistant: its latest version's settings under the command line's own (which it must
    allow), and what the run's context records of it (in agent mode, its tools too)."""
    from ragline.commands.assistants import describe
    from ragline.service.access import Principal
    from ragline.service.assistant_service import AssistantService, check_agent_model
    from ragline.service.backend import open_assistant_store

    try:
        async with open_assistant_store(services) as store:
            turn = await AssistantService(store, services).turn(Principal(args.tenant, args.user, frozenset(split_names(args.groups))), args.assistant, _fields(args, query, kb_ids))
        if turn.assistant.mode == "agent":
            check_agent_model(turn.request, services.settings)
    except Exception as exc:
        if (message := describe(exc)) is None:
            raise
        raise CLIError(message) from None
    used = turn.assistant
    return turn.request, {"agent": used.config, "assistant_id": used.id, "assistant_version": used.version, **used.agent_tools()}


class _SampleProgress:
    """Indexing progress of the sample, shown only when something is embedded: an unchanged sample
    (every later start) prints nothing."""

    def __init__(self) -> None:
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        if not total or (done >= total and not self.shown):
            return
        self.shown = True
        print(f"\rindexing the sample knowledge base: {done}/{total}", end="\n" if done >= total else "",
              file=sys.stderr, flush=True)


def knowledge_base_ids(args: argparse.Namespace, services: Services) -> list[str]:
    """Ids of the --kb names (or ids), read from the catalog alone: a wrong name fails at once."""
    from ragline.retrieval.errors import RetrievalError

    try:
        return [services.find_knowledge_base(name, args.tenant).id for name in getattr(args, "kb", None) or []]
    except RetrievalError as exc:
        raise CLIError(describe_failure(exc)) from None


async def with_sample(args: argparse.Namespace, services: Services, ids: list[str]) -> list[str]:
    """The ids plus the bundled sample base with --sample (indexed on first use, and when it changed)."""
    if not getattr(args, "sample", False):
        return ids
    from ragline.ingestion.sample import ensure_sample_kb

    stack = await asyncio.to_thread(lambda: services.retrieval)  # opens Chroma: off the event loop
    return [*ids, (await ensure_sample_kb(stack, args.tenant, progress=_SampleProgress())).id]


async def _ask(args: argparse.Namespace, graphs: Graphs, services: Services, query: str, session_id: str, kb_ids: list[str]) -> bool:
    from ragline.commands.terminal import TerminalPrinter, approval_prompt
    from ragline.contracts.context import RunContext, RunHost
    from ragline.contracts.events import ResponseType
    from ragline.graph.turn import stream_turn

    request, assistant = (await _assistant_turn(args, services, query, kb_ids)) if args.assistant else (_request(args, query, kb_ids), {})
    agent = "agent_tools" in assistant  # an agent-mode assistant's turn records its tools
    printer = TerminalPrinter(sys.stdout, sys.stderr, color=sys.stdout.isatty(), searched=bool(kb_ids or request.knowledge_base_ids), agent=agent)
    context = RunContext(session_id=session_id, tenant_id=args.tenant, user_id=args.user, groups=tuple(split_names(args.groups)), **assistant,
                         host=RunHost(services=services))
    graph = graphs.agent() if agent else graphs.pipeline()
    decide = approval_prompt(sys.stderr, sys.stdin.readline)
    asked_at, first_token, completed = time.time(), None, None
    async for event in stream_turn(graph, request, context, decide=decide):
        printer(event)
        if event.response_type == ResponseType.ANSWER and event.content and first_token is None:
            first_token = time.time()
        elif event.response_type == ResponseType.COMPLETE:
            completed = time.time()
    if getattr(args, "timings", False):
        print(_timings(services.local_engines.recent_calls(), asked_at, first_token, completed), file=sys.stderr)
    return not printer.failed


def _timings(recent_calls: list[CallStats], asked_at: float, first_token: float | None, completed: float | None) -> str:
    """One line of where the time went, in seconds since the command started (and model-call figures)."""

    def since(moment: float | None) -> str:
        return f"{moment - STARTED_AT:.2f}" if moment else "-"

    parts = [f"question asked {since(asked_at)}"]
    calls = [c for c in recent_calls if c.called_at >= asked_at]
    if calls:
        parts.append(f"first model call {since(calls[0].called_at)}")
        parts.append(f"model calls {len(calls)}, answer prompt {calls[-1].prompt_tokens} tokens ({calls[-1].cached_tokens} cached)")
    parts += [f"first answer token {since(first_token)}", f"complete {since(completed)}"]
    return "timings (s since start): " + "; ".join(parts) + f" [started_at={STARTED_AT:.3f}]"


class Graphs:
    """The graphs a command's turns run on, compiled when first needed, on one checkpointer: the
    pipeline --pipeline names, and agent mode's for an agent-mode --assistant."""

    def __init__(self, args: argparse.Namespace, saver: object) -> None:
        self.args, self.saver = args, saver
        self._compiled: dict[str, Any] = {}

    def pipeline(self) -> Any:
        from ragline.graph.graphs import build_graph

        if "pipeline" not in self._compiled:
            try:
                self._compiled["pipeline"] = build_graph(self.args.pipeline, checkpointer=self.saver)
            except ValueError as exc:
                raise CLIError(str(exc)) from None
        return self._compiled["pipeline"]

    def agent(self) -> Any:
        from ragline.graph.agent import build_agent_graph

        if "agent" not in self._compiled:
            self._compiled["agent"] = build_agent_graph(checkpointer=self.saver)
        return self._compiled["agent"]


async def _run_ask(args: argparse.Namespace) -> int:
    from ragline.services import Services

    query = " ".join(args.question)
    services = Services.from_settings()
    try:
        kb_ids = knowledge_base_ids(args, services)
        _request(args, query, kb_ids)  # a bad question fails before the stores and the model open
        from ragline.checkpoints.savers import memory_saver

        kb_ids = await with_sample(args, services, kb_ids)
        graphs = Graphs(args, memory_saver())
        if not args.assistant:
            graphs.pipeline()  # a wrong --pipeline fails before the model opens
        ok = await _ask(args, graphs, services, query, str(uuid.uuid4()), kb_ids)
    finally:
        await services.aclose()
    return 0 if ok else 1


async def _run_chat(args: argparse.Namespace) -> int:
    from ragline.checkpoints.savers import sqlite_saver
    from ragline.services import Services

    services = Services.from_settings()
    session_id = args.session or str(uuid.uuid4())
    try:
        kb_ids = await with_sample(args, services, knowledge_base_ids(args, services))
        async with sqlite_saver(services.settings.data_dir / "sessions.sqlite") as saver:
            graphs = Graphs(args, saver)
            if not args.assistant:
                graphs.pipeline()
            print(f"session {session_id} (continue later with --session {session_id}); empty line or Ctrl-D quits")
            while True:
                try:
                    line = await asyncio.to_thread(input, "> ")
                except EOFError:
                    break
                if not line.strip():
                    break
                await _ask(args, graphs, services, line, session_id, kb_ids)
    finally:
        await services.aclose()
    return 0


def _add_model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="litellm chat model (default: the local model, or RAGLINE_CHAT_MODEL)")
    parser.add_argument("--max-tokens", type=int, help="upper bound on answer tokens")
    parser.add_argument("--pipeline", default="ragline", help="graph to run: ragline (default), chat, chat_stream, rag_stream ...")
    parser.add_argument("--kb", action="append", metavar="NAME", help="answer from this knowledge base (repeatable)")
    parser.add_argument("--assistant", metavar="ID", help="ask with this assistant's configuration (see `ragline assistant list`)")
    parser.add_argument("--sample", action="store_true", help="answer from the bundled sample knowledge base")
    parser.add_argument("--tenant", default="default", help="tenant whose knowledge bases and memories are used")
    parser.add_argument("--user", default="default", help="user who asks: whose long-term memories are recalled, what restricted documents are read")
    parser.add_argument("--groups", default="", help="that user's groups, comma-separated (documents restricted to one of them are read)")
    parser.add_argument("--timings", action="store_true", help="print where the time went (start-up, model calls, first token) on stderr")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `ask` and `chat` to the ragline command."""
    ask = subparsers.add_parser("ask", help="answer one question, streamed")
    ask.add_argument("question", nargs="+", help="the question")
    _add_model_options(ask)
    ask.set_defaults(func=lambda a: run(_run_ask(a)))
    chat = subparsers.add_parser("chat", help="a multi-turn conversation in the terminal")
    chat.add_argument("--session", help="continue this session id")
    _add_model_options(chat)
    chat.set_defaults(func=lambda a: run(_run_chat(a)))
