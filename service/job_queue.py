"""Where ingestion jobs wait, fair across tenants: in this process, or in Redis for `ragline worker`s.

Shared mode runs on saq (asyncio job queue on Redis): `ragline worker` processes take jobs with a
blocking move, a running job sends heartbeats, any worker's periodic sweep finds a job whose
worker died (no heartbeat for job_heartbeat_s) and queues it again, and a cancel aborts the job
where it runs. Why saq: it is asyncio-native (the job runs in the worker's event loop beside the
async stores), needs nothing but Redis, takes our job id as its key, and its heartbeat brings a
dead worker's job back within seconds. arq, the other asyncio option, retries a dead worker's
job only after the whole job timeout and pins redis-py below 6 (we use 8); rq and Celery run
synchronous functions in forked processes; taskiq needs a broker package and has no abort.

Fairness is ours: saq's queue is one FIFO list, so a tenant that uploads 1,000 files first would
be served 1,000 times before anyone else. Jobs therefore wait in one list per tenant; a ring of
tenants with waiting jobs is served round-robin, and only JOB_ADMIT_WINDOW jobs at a time are moved
into saq's list (atomically, by a Lua script), topped up whenever a worker takes one. Embedded
mode keeps the same per-tenant queues and ring in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from ragline import defaults
from ragline.service.ingest_job import IngestJob
from ragline.service.jobs import JobRecord
from ragline.settings import Settings

log = logging.getLogger(__name__)
QUEUE_NAME = "ragline-ingest"
FUNCTION = "ingest"


class JobQueue(Protocol):
    async def submit(self, record: JobRecord) -> None: ...

    async def cancel(self, record: JobRecord) -> None: ...

    async def aclose(self) -> None: ...


class LocalJobQueue:
    """Embedded mode: `workers` tasks of this event loop serve per-tenant FIFO queues round-robin."""

    def __init__(self, run: Callable[[str], Coroutine[Any, Any, object]], workers: int = defaults.JOB_WORKERS) -> None:
        self._run = run
        self._pending: dict[str, deque[str]] = {}
        self._ring: deque[str] = deque()  # tenants with waiting jobs, served in turn
        self._ready = asyncio.Condition()
        self._running: dict[str, asyncio.Task[object]] = {}
        self._workers = [asyncio.create_task(self._work()) for _ in range(workers)]

    async def submit(self, record: JobRecord) -> None:
        async with self._ready:
            if record.tenant_id not in self._pending:
                self._pending[record.tenant_id] = deque()
                self._ring.append(record.tenant_id)
            self._pending[record.tenant_id].append(record.id)
            self._ready.notify()

    async def _next(self) -> str:
        async with self._ready:
            await self._ready.wait_for(lambda: bool(self._ring))
            tenant = self._ring.popleft()
            waiting = self._pending[tenant]
            job_id = waiting.popleft()
            if waiting:
                self._ring.append(tenant)  # the tenant's next job waits for every other tenant's turn
            else:
                del self._pending[tenant]
            return job_id

    async def _work(self) -> None:
        while True:
            job_id = await self._next()
            task: asyncio.Task[object] = asyncio.create_task(self._run(job_id))
            self._running[job_id] = task
            try:
                await asyncio.wait({task})  # returns also when the job is cancelled; a cancel of this worker propagates
                if not task.cancelled() and task.exception() is not None:
                    log.error("ingestion job %s failed", job_id, exc_info=task.exception())
            finally:
                self._running.pop(job_id, None)
                if not task.done():
                    task.cancel()

    async def cancel(self, record: JobRecord) -> None:
        async with self._ready:
            waiting = self._pending.get(record.tenant_id)
            if waiting is not None and record.id in waiting:
                waiting.remove(record.id)
                if not waiting:
                    del self._pending[record.tenant_id]
                    self._ring.remove(record.tenant_id)
        task = self._running.get(record.id)
        if task is not None:
            task.cancel()

    async def aclose(self) -> None:
        for task in [*self._workers, *self._running.values()]:
            task.cancel()
        await asyncio.gather(*self._workers, *self._running.values(), return_exceptions=True)


# KEYS: ring, payloads, pending list of the tenant. ARGV: job id, saq payload, tenant.
_SUBMIT = """
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('RPUSH', KEYS[3], ARGV[1])
if not redis.call('LPOS', KEYS[1], ARGV[3]) then redis.call('RPUSH', KEYS[1], ARGV[3]) end
return 1
"""

# KEYS: ring, payloads, saq's incomplete zset, saq's queued list. ARGV: window, pending prefix, saq job id prefix.
# Moves jobs into saq's list the way saq's own enqueue does (SET, ZADD 0, RPUSH), one tenant's turn at a time.
_ADMIT = """
local admitted = {}
local room = tonumber(ARGV[1]) - redis.call('LLEN', KEYS[4])
while room > 0 do
  local tenant = redis.call('LPOP', KEYS[1])
  if not tenant then break end
  local pending = ARGV[2] .. tenant
  local job = redis.call('LPOP', pending)
  if redis.call('LLEN', pending) > 0 then redis.call('RPUSH', KEYS[1], tenant) end
  local payload = job and redis.call('HGET', KEYS[2], job)
  if payload then
    redis.call('HDEL', KEYS[2], job)
    local id = ARGV[3] .. job
    redis.call('SET', id, payload)
    redis.call('ZADD', KEYS[3], 0, id)
    redis.call('RPUSH', KEYS[4], id)
    table.insert(admitted, job)
    room = room - 1
  end
end
return admitted
"""


class RedisJobQueue:
    """Shared mode: per-tenant lists in Redis in front of a saq queue that `ragline worker`s serve."""

    def __init__(self, redis: Any, settings: Settings, *, prefix: str = "ragline:jobs") -> None:
        self.redis, self.settings = redis, settings  # a client without decode_responses: saq reads bytes
        from ragline.service.saq_queue import SweptQueue

        self.saq = SweptQueue(redis, name=QUEUE_NAME, grace_s=settings.job_heartbeat_s)
        self._ring, self._payloads, self._pending = f"{prefix}:ring", f"{prefix}:payloads", f"{prefix}:pending:"
        self._submit = redis.register_script(_SUBMIT)
        self._admit = redis.register_script(_ADMIT)

    def _saq_job(self, job_id: str) -> Any:
        from saq.job import Job, Status
        from saq.utils import now

        settings = self.settings
        return Job(FUNCTION, kwargs={"job_id": job_id}, queue=self.saq, key=job_id, timeout=settings.job_timeout_s,
                   heartbeat=settings.job_heartbeat_s, retries=settings.job_retries, ttl=defaults.JOB_TTL_S,
                   status=Status.QUEUED, queued=now())

    async def submit(self, record: JobRecord) -> None:
        payload = self.saq.serialize(self._saq_job(record.id))
        await self._submit(keys=[self._ring, self._payloads, self._pending + record.tenant_id], args=[record.id, payload, record.tenant_id])
        await self.admit()

    async def admit(self) -> list[str]:
        """Top saq's list up to the window, round-robin over tenants; the ids moved."""
        moved = await self._admit(keys=[self._ring, self._payloads, self.saq.namespace("incomplete"), self.saq.namespace("queued")],
                                  args=[defaults.JOB_ADMIT_WINDOW, self._pending, self.saq.job_id("")])
        return [m.decode() if isinstance(m, bytes) else str(m) for m in moved]

    async def cancel(self, record: JobRecord) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            await pipe.hdel(self._payloads, record.id).lrem(self._pending + record.tenant_id, 0, record.id).execute()
        job = await self.saq.job(record.id)
        if job is not None and not job.completed:
            await self.saq.abort(job, "canceled")  # dequeued at once, or cancelled where it runs within a second

    async def aclose(self) -> None:
        await self.saq._pubsub.close()  # the client is the caller's; only the queue's listener is ours


async def run_worker(queue: RedisJobQueue, job: IngestJob, settings: Settings, *, stop: asyncio.Event | None = None,
                     handle_signals: bool = True) -> None:
    """Serve jobs until SIGTERM/SIGINT (or `stop`): the body of `ragline worker`, and of the jobs
    `ragline serve` runs itself (there without signal handlers: the server owns its signals)."""
    from saq.types import Context
    from saq.worker import Worker

    async def ingest(ctx: Context, *, job_id: str) -> None:
        current = ctx["job"]
        await job.run(job_id, touch=current.update)  # an update stamps saq's heartbeat

    queue.saq.gave_up = job.gave_up  # a job whose worker died job_retries times fails, visibly

    async def admit(_ctx: Context) -> None:
        await queue.admit()  # a worker took a job (or finished one): the next tenant's job moves up

    worker = Worker(queue.saq, functions=[(FUNCTION, ingest)], concurrency=settings.job_workers,
                    before_process=[admit], after_process=[admit],
                    timers={"sweep": settings.job_sweep_s, "abort": 1, "schedule": 1, "worker_info": 10},
                    shutdown_grace_period_s=1)
    if not handle_signals:
        worker.SIGNALS = []  # saq would replace uvicorn's handlers and never give them back

    async def top_up() -> None:
        while True:  # also after a burst of submits that found the window full while every worker was busy
            await asyncio.sleep(1)
            with contextlib.suppress(Exception):  # Redis restarting: the next round tries again
                await queue.admit()

    async def stopper() -> None:
        if stop is not None:
            await stop.wait()
            worker.event.set()

    helpers = [asyncio.create_task(top_up()), asyncio.create_task(stopper())]
    try:
        await worker.start()
    finally:
        for helper in helpers:
            helper.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)
