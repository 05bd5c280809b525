"""Structured logs carry the request, session and message ids of the work they describe."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import sys
from typing import Any
from urllib.parse import quote, quote_plus, unquote_plus

from hypothesis import given
from hypothesis import strategies as st

from ragline.logs import JsonFormatter, RedactSecrets, bind_log_ids, log_ids


def _logger() -> tuple[logging.Logger, io.StringIO]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("ragline.test_logs")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return logger, out


async def test_records_carry_the_ids_of_their_request_and_of_the_run_task_it_started():
    logger, out = _logger()

    async def run() -> None:
        bind_log_ids(session_id="s1", message_id="m1")
        logger.info("run step")

    with log_ids(request_id="r1"):
        logger.info("request")
        await asyncio.create_task(run())
    logger.info("outside")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert lines[0] | {"time": ""} == {"time": "", "level": "info", "logger": "ragline.test_logs", "message": "request", "request_id": "r1"}
    assert (lines[1]["request_id"], lines[1]["session_id"], lines[1]["message_id"]) == ("r1", "s1", "m1")
    assert "request_id" not in lines[2] and "session_id" not in lines[2]


def test_a_record_under_an_active_span_carries_its_trace_and_span_ids():
    from opentelemetry.sdk.trace import TracerProvider

    logger, out = _logger()
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("work") as span:
        logger.info("inside")
    logger.info("after")
    inside, after = (json.loads(line) for line in out.getvalue().splitlines())
    context = span.get_span_context()
    assert (inside["trace_id"], inside["span_id"]) == (f"{context.trace_id:032x}", f"{context.span_id:016x}")
    assert "trace_id" not in after and "span_id" not in after


async def test_records_of_a_traced_turn_carry_the_turn_s_trace_id(scripted_model, monkeypatch):
    """A retry logged inside the answer stage names the trace that Langfuse shows for the turn."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from ragline.checkpoints.savers import memory_saver
    from ragline.contracts.context import RunContext, RunHost
    from ragline.contracts.request import PipelineRequest
    from ragline.graph import tracing
    from ragline.graph.graphs import build_graph
    from ragline.graph.turn import stream_turn
    from ragline.models import retry
    from ragline.services import Services
    from tests.scripted_model import Reply

    async def no_wait(_seconds: float) -> None:
        return None

    monkeypatch.setattr(retry, "_sleep", no_wait)
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    monkeypatch.setattr(logging.getLogger("ragline.models"), "handlers", [handler])
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracing.enable(provider)
    scripted_model.on(lambda b: True, Reply(status=503), times=1)
    scripted_model.on(lambda b: True, Reply.text("Traced."))
    try:
        context = RunContext(session_id="s-log", request_id="r-log", assistant_message_id="m-log", host=RunHost(services=Services()))
        request = PipelineRequest(query="hi", rewrite_enabled=False)
        [_ async for _ in stream_turn(build_graph("chat_stream", checkpointer=memory_saver()), request, context)]
    finally:
        tracing.disable()
    [turn] = [s for s in spans.get_finished_spans() if s.name == "ragline.turn"]
    [retried] = [json.loads(line) for line in out.getvalue().splitlines() if "retry 1" in line]
    assert retried["trace_id"] == f"{turn.context.trace_id:032x}"


def test_secret_query_parameters_are_redacted_from_any_record():
    from ragline.logs import REDACTED, RedactSecrets, redact

    assert redact("GET /v1/x/events?api_key=s3cr3t&after=4 HTTP/1.1") == f"GET /v1/x/events?api_key={REDACTED}&after=4 HTTP/1.1"
    assert redact("/a?token=t0k&API_KEY=k2") == f"/a?token={REDACTED}&API_KEY={REDACTED}"
    assert redact("/v1/models?limit=5") == "/v1/models?limit=5"
    record = logging.LogRecord("uvicorn.access", logging.INFO, "", 0, '%s - "%s %s HTTP/%s" %d',
                               ("127.0.0.1:5", "GET", "/v1/jobs/j/events?api_key=s3cr3t", "1.1", 200), None)
    assert RedactSecrets().filter(record) and "s3cr3t" not in record.getMessage()


# --- credentials in URLs: judged by the decoded name, whatever its case or encoding ---

CREDENTIAL_NAMES = ("api_key", "apikey", "key", "token", "access_token", "refresh_token", "code", "state", "password",
                    "secret", "client_secret", "x-api-key")


def _spelled(name: str, draw: Any) -> str:
    """`name` in random case with random characters percent-encoded (upper or lower hex, once or twice)."""
    out = []
    for char in name:
        char = char.upper() if draw(st.booleans()) else char
        encodings = draw(st.integers(0, 2))
        for _ in range(encodings):
            char = "".join(f"%{b:02X}" if draw(st.booleans()) else f"%{b:02x}" for b in char.encode())
        out.append(char)
    return "".join(out)


@st.composite
def _query_with_a_secret(draw: Any) -> tuple[str, str, list[str]]:
    name = _spelled(draw(st.sampled_from(CREDENTIAL_NAMES)), draw)
    secret = "S3CR3T" + draw(st.text(alphabet=st.characters(codec="ascii", exclude_categories=("Cc",)), min_size=4, max_size=20))
    value = draw(st.sampled_from([quote(secret, safe=""), quote_plus(secret, safe="/:")]))
    before = draw(st.lists(st.sampled_from(["after=4", "limit=5", "message_id=m1", "q=what%3F"]), max_size=3))
    after = draw(st.lists(st.sampled_from(["after=4", "mode=vector"]), max_size=2))
    separator = draw(st.sampled_from(["&", ";"]))
    return separator.join([*before, f"{name}={value}", *after]), value, [*before, *after]


@given(_query_with_a_secret())
def test_a_credential_parameter_is_redacted_whatever_the_case_and_encoding_of_its_name(drawn):
    from ragline.logs import REDACTED, redact, redact_query

    query, value, others = drawn
    path = f"/api/v1/knowledge-bases/kb/jobs/j/events?{query}"
    record = logging.LogRecord("uvicorn.access", logging.INFO, "", 0, '%s - "%s %s HTTP/%s" %d', ("127.0.0.1:5", "GET", path, "1.1", 200), None)
    assert RedactSecrets().filter(record)
    for text in (record.getMessage(), redact(f'GET {path} HTTP/1.1'), redact_query(query)):
        assert value not in text and unquote_plus(value) not in text and REDACTED in text
        assert all(pair in text for pair in others)  # the rest of the query stays readable


def test_a_percent_encoded_key_name_is_redacted_and_other_parameters_are_kept():
    from ragline.logs import REDACTED, redact

    assert redact("GET /e?api%5Fkey=k1&API%5FKEY=k2&after=4 HTTP/1.1") == f"GET /e?api%5Fkey={REDACTED}&API%5FKEY={REDACTED}&after=4 HTTP/1.1"
    assert redact("/api/v1/mcp/oauth/callback?state=st1&code=c0de&error=") == f"/api/v1/mcp/oauth/callback?state={REDACTED}&code={REDACTED}&error="
    assert redact("/x?api_key%3Dk3&b=2") == f"/x?{REDACTED}&b=2"  # the value hidden in an encoded name
    assert redact("/v1/models?limit=5&message_id=m") == "/v1/models?limit=5&message_id=m"


def _logged_with(exc: BaseException, name: str = "saq") -> logging.LogRecord:
    try:
        raise exc
    except BaseException:
        return logging.getLogger(name).makeRecord(name, logging.ERROR, __file__, 1, "Upkeep task failed unexpectedly",
                                                  None, sys.exc_info())


def test_a_redis_fault_is_one_warning_line_and_its_repeats_are_counted_not_written():
    from redis.exceptions import OutOfMemoryError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    from ragline.logs import StoreFaultsOnOneLine

    now = [0.0]
    faults = StoreFaultsOnOneLine(clock=lambda: now[0])
    first = _logged_with(RedisTimeoutError("Timeout reading from 127.0.0.1:6379"))
    assert faults.filter(first)
    assert first.levelno == logging.WARNING and first.exc_info is None
    assert first.getMessage() == "Upkeep task failed unexpectedly: Redis is not answering: Timeout reading from 127.0.0.1:6379"
    assert [faults.filter(_logged_with(RedisTimeoutError("Timeout reading from 127.0.0.1:6379"))) for _ in range(5)] == [False] * 5
    now[0] = StoreFaultsOnOneLine.REPEAT_S
    again = _logged_with(RedisTimeoutError("Timeout reading from 127.0.0.1:6379"))
    assert faults.filter(again) and again.getMessage().endswith("(and 5 times more)")
    try:  # wrapped, as a store wraps it: still the store's fault
        try:
            raise OutOfMemoryError("command not allowed when used memory > 'maxmemory'")
        except OutOfMemoryError as full:
            raise RuntimeError("could not store the job") from full
    except RuntimeError as wrapped:
        record = _logged_with(wrapped)
    assert faults.filter(record) and "Redis is full (maxmemory)" in record.getMessage() and record.exc_info is None


def test_a_bug_keeps_its_traceback():
    from ragline.logs import StoreFaultsOnOneLine

    record = _logged_with(KeyError("job"))
    assert StoreFaultsOnOneLine().filter(record)
    assert record.levelno == logging.ERROR and record.exc_info is not None
