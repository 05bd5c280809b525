"""Structured logs: one JSON object per line, carrying the request, session and message ids,
and the OpenTelemetry trace and span ids when a span is active.

The ids live in a context variable: the HTTP middleware sets the request id (the client's
X-Request-ID, or a new one), a run sets its session and assistant message ids, and every log
record made in that context carries them, including records of the tasks it starts. A record
made under an active OpenTelemetry span (an embedding application's, or an instrumented
server's) also carries that span's `trace_id` and `span_id`, so a log line leads to its trace;
a traced turn binds its trace id as a log id (graph/tracing.py), since its spans are never made
current.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote_plus

from ragline.redis_clients import out_of_memory, unreachable

_IDS: contextvars.ContextVar[dict[str, str]] = contextvars.ContextVar("ragline_log_ids", default={})  # noqa: B039 (never mutated)
FIELDS = ("request_id", "session_id", "message_id")
# A key in a URL (an EventSource cannot send headers) must never reach a log line: uvicorn's
# access log writes the whole path with its raw query, for valid and wrong keys alike. The server
# decodes a parameter's name before it reads it (`api%5Fkey` is `api_key`), so a name is judged
# decoded, in any case, and with its separators ignored (`API-Key`, `api.key`, `apiKey`).
_QUERY = re.compile(r"\?([^\s\"'<>#]+)")  # a URL's query in a log line: up to a space, a quote or a fragment
_PAIR_SEPARATOR = re.compile(r"([&;])")  # `;` too: some parsers split there, and redacting more is safe
_NAME_NOISE = re.compile(r"[\s_.\-\[\]]+")
_SECRET_WORDS = ("key", "token", "secret", "password", "passwd", "credential", "signature", "auth")
_SECRET_NAMES = frozenset({"code", "state", "sig", "pwd", "pass", "nonce", "otp"})
_DECODE_ROUNDS = 4  # a name encoded twice (`api%255Fkey`) is still judged by what it says
REDACTED = "[redacted]"


def decoded_name(name: str) -> str:
    """A parameter's name as the server reads it, decoded again while it changes (bounded)."""
    for _ in range(_DECODE_ROUNDS):
        decoded = unquote_plus(name)
        if decoded == name:
            break
        name = decoded
    return name


def is_secret_name(name: str) -> bool:
    """Whether a query parameter's name (raw, as it came in the URL) may carry a credential."""
    plain = _NAME_NOISE.sub("", decoded_name(name).partition("=")[0]).casefold()
    return plain in _SECRET_NAMES or any(word in plain for word in _SECRET_WORDS)


def redact_pair(pair: str) -> str:
    """One `name=value` of a query, its value redacted when the name is credential-like."""
    name, equals, _ = pair.partition("=")
    if not is_secret_name(name):
        return pair
    if "=" in decoded_name(name):  # `api_key%3Dvalue`: the value hides in an encoded name
        return REDACTED
    return f"{name}={REDACTED}" if equals else pair


def redact_query(query: str) -> str:
    """The query with the value of every credential-like parameter replaced, the rest as it was."""
    parts = _PAIR_SEPARATOR.split(query)
    return "".join(part if i % 2 else redact_pair(part) for i, part in enumerate(parts))


def redact(text: str) -> str:
    """The text with every URL query in it redacted (redact_query)."""
    return _QUERY.sub(lambda match: "?" + redact_query(match.group(1)), text)


class RedactSecrets(logging.Filter):
    """Rewrites a record's message with secret query parameters replaced, whoever logged it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "uvicorn.access":
            record.args = _access_arguments(record.args)
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


class StoreFaultsOnOneLine(logging.Filter):
    """A Redis fault (full, away) is the operator's to fix, not a bug: a record that carries one
    becomes a one-line warning, and the same line again within REPEAT_S is counted, not written.
    saq's upkeep logged a traceback every few seconds for as long as Redis was full or paused."""

    REPEAT_S = 60.0

    def __init__(self, clock: Any = time.monotonic) -> None:
        super().__init__()
        self.clock = clock
        self._last: dict[str, tuple[float, int]] = {}  # line -> (when written, repeats not written since)

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is None or not (out_of_memory(exc) or unreachable(exc)):
            return True
        kind = "full (maxmemory)" if out_of_memory(exc) else "not answering"
        line = f"{record.getMessage()}: Redis is {kind}: {exc}"[:500]
        now = self.clock()
        written, repeats = self._last.get(line, (float("-inf"), 0))
        if now - written < self.REPEAT_S:
            self._last[line] = (written, repeats + 1)
            return False
        self._last = {seen: when for seen, when in self._last.items() if now - when[0] < self.REPEAT_S}
        self._last[line] = (now, 0)
        record.msg, record.args = line + (f" (and {repeats} times more)" if repeats else ""), None
        record.exc_info, record.exc_text = None, None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def _access_arguments(args: Any) -> Any:
    """uvicorn's access record: (client, method, path with query, version, status). Its query is
    redacted whole, since in a whole line a value holding a quote or a space would end the query early."""
    if not (isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str) and "?" in args[2]):
        return args
    path, _, query = args[2].partition("?")
    return (*args[:2], f"{path}?{redact_query(query)}", *args[3:])


@contextmanager
def log_ids(**ids: str) -> Iterator[None]:
    """Add ids to every record logged inside the block (and in tasks started from it)."""
    token = _IDS.set({**_IDS.get(), **{k: v for k, v in ids.items() if v}})
    try:
        yield
    finally:
        _IDS.reset(token)


def bind_log_ids(**ids: str) -> None:
    """Add ids for the rest of the current task (a run's task: its session and message)."""
    _IDS.set({**_IDS.get(), **{k: v for k, v in ids.items() if v}})


def trace_ids() -> dict[str, str]:
    """The active OpenTelemetry span's trace and span ids (hex, as trace backends show them), if any."""
    trace = sys.modules.get("opentelemetry.trace")  # never imported here: untraced processes skip the import
    if trace is None:
        return {}
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return {}
    return {"trace_id": format(context.trace_id, "032x"), "span_id": format(context.span_id, "016x")}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            **_IDS.get(),
            **trace_ids(),
        }
        audit = getattr(record, "audit", None)
        if isinstance(audit, dict):  # a key's use (api/auth.py): its fields on the line
            entry.update(audit)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def configure(level: str = "info", *, json_lines: bool = True) -> None:
    """Route ragline's and uvicorn's records to stderr, as JSON lines or plain text."""
    handler = logging.StreamHandler()
    handler.addFilter(RedactSecrets())
    handler.addFilter(StoreFaultsOnOneLine())  # a Redis fault logged with its traceback anywhere: one line
    handler.setFormatter(JsonFormatter() if json_lines else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for name in ("ragline", "uvicorn", "uvicorn.error", "saq"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level.upper())
        logger.propagate = False
    saq = logging.getLogger("saq")  # the job queue: its warnings only (its info is a line per job); Redis faults on one line
    saq.setLevel(max(logging.getLevelName(level.upper()), logging.WARNING))
    if not any(isinstance(f, StoreFaultsOnOneLine) for f in saq.filters):
        saq.addFilter(StoreFaultsOnOneLine())
