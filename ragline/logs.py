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

_IDS: contextvars.ContextVar[dict[str, str]] = contextvars.ContextVar("ragline_log_ids", default={})  # noqa: B039 (never mutated)
FIELDS = ("request_id", "session_id", "message_id")
# A key in a URL (an EventSource cannot send headers) must never reach a log line: uvicorn's
# access log writes the whole path with its query, for valid and wrong keys alike.
_SECRET_PARAMETER = re.compile(r"(?i)([?&;](?:api_key|apikey|key|token|access_token|secret|password)=)[^&;#\s\"']*")
REDACTED = "[redacted]"


def redact(text: str) -> str:
    return _SECRET_PARAMETER.sub(rf"\g<1>{REDACTED}", text)


class RedactSecrets(logging.Filter):
    """Rewrites a record's message with secret query parameters replaced, whoever logged it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


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
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def configure(level: str = "info", *, json_lines: bool = True) -> None:
    """Route ragline's and uvicorn's records to stderr, as JSON lines or plain text."""
    handler = logging.StreamHandler()
    handler.addFilter(RedactSecrets())
    handler.setFormatter(JsonFormatter() if json_lines else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for name in ("ragline", "uvicorn", "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level.upper())
        logger.propagate = False
