"""`ragline worker`: runs ingestion jobs from Redis (uploads answered 202 by any `ragline serve` replica).

Needs RAGLINE_REDIS_URL (without it, `ragline serve` runs the jobs itself). A worker reads the
same settings as the service: the data directory and stores it indexes into, the embedding model,
and job_workers (jobs at once; --concurrency overrides). SIGTERM or Ctrl-C stops it; a job it was
running when it died (even by SIGKILL) is retried by another worker once its heartbeat is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ragline.commands.running import say_error
from ragline.settings import Settings

if TYPE_CHECKING:
    from ragline.services import Services

REDIS_WAIT_S = 2.0  # between two tries of a worker waiting for Redis to answer at start


async def serve_jobs(settings: Settings) -> None:
    from ragline.checkpoints.redis_streams import RedisStreamManager
    from ragline.service.job_queue import run_worker
    from ragline.service.job_service import redis_jobs
    from ragline.services import Services

    services = Services.from_settings(settings)
    warm_up = services.start_warm_up()
    streams = RedisStreamManager(services.redis_async("events"))  # progress events
    _store, queue, runner = redis_jobs(services, streams)
    try:
        await _when_redis_answers(queue.redis.ping)
        await _when_redis_answers(lambda: asyncio.to_thread(_ready_to_ingest, services, warm_up))
        await run_worker(queue, runner, settings)
    finally:
        await queue.aclose()
        await streams.aclose()
        await services.aclose()


async def _when_redis_answers(step: Callable[[], Awaitable[object]]) -> None:
    """`step`, again every REDIS_WAIT_S while Redis does not answer: a worker started while Redis
    restarts or is paused waits for it (it exited with the first timeout, its jobs left to others)."""
    from ragline.redis_clients import unreachable

    waiting = False
    while True:
        try:
            await step()
            if waiting:
                print("ragline worker: Redis answers again", file=sys.stderr, flush=True)
            return
        except Exception as exc:
            if not unreachable(exc):
                raise
            if not waiting:
                print(f"ragline worker: Redis does not answer ({exc}); waiting for it", file=sys.stderr, flush=True)
                waiting = True
        await asyncio.sleep(REDIS_WAIT_S)


def _ready_to_ingest(services: Services, warm_up: threading.Thread | None) -> None:
    """The stores open and the model client imported before the first job is taken, not by it: a
    job's first minute on a loaded host (a worker at nice 10 gets a tenth of a core) would
    otherwise pass without a progress event, and opened on the event loop, without a heartbeat."""
    services.ingestion  # noqa: B018 (opened on first access)
    if warm_up is not None:
        warm_up.join()


def _route_queue_log(level: str) -> None:
    """saq's own records (a job taken, swept from a dead worker, retried) go where ragline's go:
    they are what tells an operator why a job ran twice."""
    import logging

    queue_log, ours = logging.getLogger("saq"), logging.getLogger("ragline")
    queue_log.handlers[:] = ours.handlers
    queue_log.setLevel(max(logging.getLevelName(level.upper()), logging.INFO))
    queue_log.propagate = False


def _yield_cpu(niceness: int) -> int:
    """Run at `niceness` (never less nice than started): on a host that also serves answers, the
    worker takes only the CPU they leave, so chat keeps its latency while documents are ingested."""
    current = os.nice(0)
    return os.nice(niceness - current) if niceness > current else current


def run(args: argparse.Namespace) -> int:
    from ragline.logs import configure
    from ragline.settings import get_settings

    settings = get_settings()
    if not settings.redis_url:
        say_error("RAGLINE_REDIS_URL is not set; without Redis, `ragline serve` runs ingestion jobs itself")
        return 2
    if args.concurrency:
        settings = settings.model_copy(update={"job_workers": args.concurrency})
    configure(args.log_level, json_lines=args.log_format == "json")
    _route_queue_log(args.log_level)
    nice = _yield_cpu(settings.worker_nice)
    print(f"ragline worker: serving ingestion jobs, {settings.job_workers} at a time, at nice {nice}", file=sys.stderr, flush=True)
    asyncio.run(serve_jobs(settings))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("worker", help="run ingestion jobs (uploads) from Redis: parse, chunk, embed, index")
    parser.add_argument("--concurrency", type=int, help="jobs at once (default: RAGLINE_JOB_WORKERS or 1)")
    parser.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    parser.add_argument("--log-format", default="json", choices=["json", "text"])
    parser.set_defaults(func=run)
