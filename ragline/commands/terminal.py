"""What `ragline ask` and `ragline chat` print: thinking dimmed, answer plain, citations as [n];
in agent mode, each tool call and its result as a line on stderr, and the approval question."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from typing import Any, TextIO

from ragline.citations.plain import UNSUPPORTED_FOOTNOTE
from ragline.contracts.events import ResponseType, StreamResponse

DIM, RESET = "\033[2m", "\033[0m"
UNSUPPORTED_NOTE = "[?] no passage of the knowledge base supports this sentence"
UNSEARCHED_NOTE = "(no knowledge base was searched: this answer is the model's own, not from your documents; add --kb NAME or --sample)"
_KB_TAG = re.compile(r"<(kb|web)\b([^>]*)/>")
_ATTRIBUTE = re.compile(r'(\w+)="([^"]*)"')
CALL_ARGUMENTS_CHARS = 120  # of a tool call's arguments shown on its line


def call_line(name: str, arguments: dict[str, Any]) -> str:
    """`search_knowledge(query="who designed it")`, the arguments cut to one short line."""
    shown = ", ".join(f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in arguments.items())
    return f"{name}({shown if len(shown) <= CALL_ARGUMENTS_CHARS else shown[:CALL_ARGUMENTS_CHARS] + '...'})"


def place(location: dict[str, Any] | None) -> str:
    """Where a cited passage stands: its PDF page(s), else its heading path; "" when unknown."""
    if not location:
        return ""
    pages = location.get("pages") or []
    if pages:
        return f"p. {pages[0]}" if pages[0] == pages[-1] else f"pp. {pages[0]}-{pages[-1]}"
    return " > ".join(location.get("headings") or [])


class TerminalPrinter:
    """Renders events: thinking dimmed, answer plain, citations as [n] with their sources listed
    after the answer, errors on stderr. A source Ragline matched to a sentence the model left
    uncited (`attributed="true"`) prints as [n~], and is listed as matched unless the model cited
    it elsewhere. A sentence no passage supports prints [?], explained under the sources."""

    def __init__(self, out: TextIO, err: TextIO, color: bool, *, searched: bool = True, agent: bool = False) -> None:
        self.out, self.err, self.color = out, err, color
        self.searched = searched  # False: no knowledge base was chosen, so the answer is the model's alone
        self.agent = agent  # agent mode: its tool calls are shown (the pipeline's progress cards are not)
        self._in_thinking = False
        self.failed = False
        self.cited: dict[str, str] = {}  # chunk id or url -> label shown under the answer
        self.model_cited: set[str] = set()  # ...of which the model itself cited these
        self.unsupported = False  # some sentence was marked as supported by no passage
        self.places: dict[str, str] = {}  # chunk id -> where its passage stands ("p. 3", a heading path)
        self._agent_calls: set[str] = set()

    def _footnote(self, match: re.Match[str]) -> str:
        attributes = dict(_ATTRIBUTE.findall(match.group(2)))
        if attributes.get("unsupported") == "true" and not attributes.get("chunk_id"):
            self.unsupported = True
            return UNSUPPORTED_FOOTNOTE
        key = attributes.get("chunk_id") or attributes.get("url") or match.group(0)
        if key not in self.cited:
            self.cited[key] = attributes.get("title") or attributes.get("url") or key
        number = list(self.cited).index(key) + 1
        if attributes.get("attributed") == "true":
            return f"[{number}~]"
        self.model_cited.add(key)
        return f"[{number}]"

    def _sources(self) -> str:
        lines = [f"[{n}] {label}" + (f", {self.places[key]}" if self.places.get(key) else "")
                 + ("" if key in self.model_cited else " (matched by Ragline, not cited by the model)")
                 for n, (key, label) in enumerate(self.cited.items(), start=1)]
        if self.unsupported:
            lines.append(UNSUPPORTED_NOTE)
        return "\n" + "\n".join(lines) if lines else ""

    def _note(self, text: str) -> None:
        """A line on stderr, after whatever the answer printed so far (dimmed on a terminal)."""
        self.out.flush()
        self.err.write(f"{DIM}{text}{RESET}\n" if self.color else f"{text}\n")

    def _agent_step(self, event: StreamResponse) -> bool:
        """Agent mode's steps: a superseded introduction ends its line, each tool call and result,
        approvals and limits are a line each. False for any other event."""
        if not self.agent:
            return False
        kind, data = event.response_type, event.data or {}
        call_id = str(data.get("tool_call_id") or "")
        if kind == ResponseType.THINKING and data.get("thought"):
            self.out.write("\n")  # the introduction the round streamed stays, on its own line
        elif kind == ResponseType.TOOL_CALL:
            self._agent_calls.add(call_id)
            self._note(f"  -> {call_line(str(data.get('tool_name')), data.get('arguments') or {})}")
        elif kind == ResponseType.TOOL_RESULT and call_id in self._agent_calls:
            self._note(f"     {data.get('output') or 'done'}" if data.get("success") else f"     failed: {data.get('error')}")
        elif kind == ResponseType.TOOL_APPROVAL_REQUIRED:
            pass  # the approval prompt asks about the call
        elif kind == ResponseType.MCP_OAUTH_REQUIRED:
            self._note(f"  {data.get('server')} needs your authorization: open {data.get('authorization_url')}")
        elif kind == ResponseType.MCP_OAUTH_RESOLVED:
            self._note("     authorized" if data.get("authorized") else f"     not authorized: {data.get('reason')}")
        elif kind == ResponseType.TOOL_APPROVAL_RESOLVED and not data.get("approved"):
            self._note(f"     denied{': ' + str(data['reason']) if data.get('reason') else ''}")
        elif kind in (ResponseType.REFLECTION, ResponseType.USER_MESSAGE_INJECTED, ResponseType.CONTEXT_COMPACTED):
            self._note(f"  ({event.content or kind})")
        else:
            return False
        return True

    def __call__(self, event: StreamResponse) -> None:
        kind = event.response_type
        if self._agent_step(event):
            pass
        elif kind == ResponseType.THINKING and event.content:
            if not self._in_thinking and self.color:
                self.out.write(DIM)
            self._in_thinking = True
            self.out.write(event.content)
        elif kind == ResponseType.REFERENCES:
            self.places.update({str(item.get("chunk_id")): place(item.get("location")) for item in event.knowledge_references or []})
        elif kind == ResponseType.ANSWER:
            self._end_thinking()
            self.out.write(_KB_TAG.sub(self._footnote, event.content))
            if event.done and (event.data or {}).get("truncated"):
                self.err.write("\n[answer truncated by the output limit]")
        elif kind == ResponseType.ERROR:
            self._end_thinking()
            self.failed = True
            first_line = (event.content or "the answer failed").strip().splitlines()[0]  # provider errors run to paragraphs
            self.err.write(f"\nragline: error: {first_line}\n")
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


def approval_prompt(err: TextIO, read_line: Callable[[], str]) -> Callable[[list[Any]], Any]:
    """Agent mode's pauses answered at the terminal: each waiting call is asked "run it? [y/N]";
    anything but y or yes (an empty line, a closed stdin) denies it. A wait for an MCP server's
    authorization goes on when the user presses Enter (the browser's return reaches a running
    `ragline serve` on the same data; the turn then reads what became of it)."""

    async def decide(interrupts: list[Any]) -> dict[str, dict[str, Any]]:
        decisions: dict[str, dict[str, Any]] = {}
        if any(isinstance(paused, dict) and paused.get("mcp_oauth_required") for paused in interrupts):
            err.write("press Enter once you have allowed access in the browser ")
            err.flush()
            await asyncio.to_thread(read_line)
        for paused in interrupts:
            for call in paused.get("tool_approval_required", []) if isinstance(paused, dict) else []:
                err.write(f"run {call_line(str(call.get('tool_name')), call.get('arguments') or {})}? [y/N] ")
                err.flush()
                line = await asyncio.to_thread(read_line)
                approved = line.strip().lower() in ("y", "yes")
                reason = "" if approved else ("denied at the terminal" if line else "no answer at the terminal (stdin closed)")
                decisions[str(call.get("tool_call_id"))] = {"approved": approved, "reason": reason}
        return decisions

    return decide
