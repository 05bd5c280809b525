"""Structured logs carry the request, session and message ids of the work they describe."""

from __future__ import annotations

import asyncio
import io
import json
import logging

from ragline.service.logs import JsonFormatter, bind_log_ids, log_ids


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
