"""Parsing an upload in a child process: its memory is bounded, and given back when the parse ends.

Parsers hold a document whole while they read it: python-docx builds the XML tree of every
paragraph before the text budget sees the first one, pypdf keeps its page objects, openpyxl its
shared strings. In the server's own process that memory stays after the parse (CPython and glibc
seldom hand freed memory back), so a few hostile uploads within the byte limits left a server
gigabytes larger. Here each parse runs in a process forked from a small preloaded server
(multiprocessing's forkserver, started once): its address space may grow PARSE_MEMORY_BYTES
beyond where it started, a cancelled job kills it, and its memory is the system's again when it
exits. What comes back is the ParsedDocument, or the parser's own IngestionError.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import select
import signal
import threading
from multiprocessing.connection import Connection
from typing import Any

from ragline import defaults
from ragline.ingestion.parsers import ParsedDocument, parse_bytes
from ragline.retrieval.errors import DocumentTooLargeError, IngestionError, ParsingStopped

CONTEXT = multiprocessing.get_context("forkserver")
# imported once by the fork server, so that each parse starts in milliseconds with its libraries loaded
CONTEXT.set_forkserver_preload(["ragline.ingestion.isolated", "docx", "openpyxl", "pypdf", "PIL.Image",
                               "rapidocr_onnxruntime"])
_POLL_S = 0.1  # how often a waiting parent looks at the stop event; the result itself wakes it at once
_JOIN_S = 5.0
_NEAR_LIMIT = 32 * 2**20  # a failure this close to the cap is the cap's


def parse_isolated(data: bytes, file_type: str, name: str = "", stop: threading.Event | None = None) -> ParsedDocument:
    """`parse_bytes` in a child process under the memory cap; the same result and the same errors.

    Setting `stop` kills the child (ParsingStopped). A child that runs out of its memory is a
    DocumentTooLargeError; one that dies otherwise (a crash in a parser library) an IngestionError.
    """
    label = name or f"the .{file_type.lower().lstrip('.')} file"
    receive, send = CONTEXT.Pipe(duplex=False)
    child = CONTEXT.Process(target=_parse_in_child, name="ragline-parse", daemon=True,
                             args=(send, data, file_type, name, limits(), defaults.PARSE_MEMORY_BYTES))
    child.start()
    send.close()  # the child holds the only writing end: a dead child reads as end of file
    try:
        outcome = _wait(receive, child, stop, label)
    finally:
        if child.is_alive():
            child.kill()
        child.join(_JOIN_S)
        receive.close()
    if isinstance(outcome, ParsedDocument):
        return outcome
    error_type, message = outcome
    raise error_type(message)


def limits() -> dict[str, Any]:
    """The limits as this process holds them (a test or an operator may have changed one)."""
    return {key: value for key, value in vars(defaults).items() if key.isupper()}


def _wait(receive: Connection, child: Any, stop: threading.Event | None, label: str) -> Any:
    outcome = answer_of(receive, child, stop)
    if outcome is not None:
        return outcome
    if stop is not None and stop.is_set():
        child.kill()
        raise ParsingStopped(f"parsing {label} stopped: its ingestion was cancelled")
    child.join(_JOIN_S)
    raise death(child.exitcode, label)


def answer_of(conn: Connection, child: Any, stop: threading.Event | None = None) -> Any | None:
    """What the child sends back; None when it ended without answering, or when `stop` was set."""
    while not conn.poll(_POLL_S):
        if (stop is not None and stop.is_set()) or (not child.is_alive() and not conn.poll(0)):
            return None
    try:
        return conn.recv()
    except EOFError:  # the child died before it answered
        return None


def death(exitcode: int | None, label: str) -> IngestionError:
    if exitcode is not None and exitcode < 0:
        how = f"signal {signal.Signals(-exitcode).name}" if -exitcode in signal.valid_signals() else f"signal {-exitcode}"
    else:
        how = f"exit status {exitcode}"
    if exitcode == -signal.SIGKILL:  # the kernel's out-of-memory killer, or an operator
        return DocumentTooLargeError(f"cannot parse {label}: its parser was killed ({how}), most likely out of memory")
    return IngestionError(f"cannot parse {label}: its parser stopped ({how})")


def _parse_in_child(send: Connection, data: bytes, file_type: str, name: str, limits: dict[str, Any], memory: int) -> None:
    _exit_when_abandoned(send)
    vars(defaults).update(limits)
    limit = cap_address_space(memory)
    outcome: Any
    try:
        outcome = parse_bytes(data, file_type, name)
    except (IngestionError, MemoryError) as exc:
        if out_of_memory(exc, limit):
            label = name or "the file"
            outcome = (DocumentTooLargeError, f"parsing {label} needs more than {memory // 2**20:,} MB of memory; split it into smaller documents")
        else:
            outcome = (type(exc), str(exc))
    del data
    send.send(outcome)
    send.close()


def cap_address_space(extra: int) -> int:
    """Let this process's address space grow by `extra` bytes from here (the cap is returned); past
    it, allocations fail (MemoryError)."""
    with open("/proc/self/statm") as statm:
        now = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = now + extra if hard == resource.RLIM_INFINITY else min(now + extra, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    return limit


def resident_bytes() -> int:
    """This process's resident memory (VmRSS)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def out_of_memory(exc: BaseException, limit: int) -> bool:
    """Whether a failure under the cap `limit` was the cap's: a library that fails to allocate often
    says so in its own words (lxml: "unknown error", onnxruntime: "bad allocation")."""
    return isinstance(exc, MemoryError) or _peak_address_space() > limit - _NEAR_LIMIT


def _peak_address_space() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmPeak:"):
                return int(line.split()[1]) * 1024
    return 0


def _exit_when_abandoned(send: Connection) -> None:
    """A killed server takes its parses along: the pipe's reading end closes with the server, and
    this child, which would otherwise parse on for nothing (the fork server outlives the server
    while any child of it lives), exits. The watcher blocks in poll(); it never spins."""
    def watch() -> None:
        watcher = select.poll()
        watcher.register(send.fileno(), select.POLLERR)  # a pipe's writing end reports POLLERR once nobody reads
        watcher.poll()
        os._exit(1)

    threading.Thread(target=watch, name="ragline-parse-watch", daemon=True).start()
