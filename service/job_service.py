"""JobService: what the API does with ingestion jobs (submit, look up, cancel), and how it is built.

Embedded mode (no Redis streams): records in memory or under data_dir/jobs, jobs run by a
bounded pool of tasks in the service's own event loop, and unfinished jobs of a previous run
start again. Shared mode (RAGLINE_REDIS_URL): records, uploads and queue in Redis, progress in
Redis Streams, jobs run by `ragline worker` processes and, unless RAGLINE_SERVE_RUNS_JOBS=false,
by the service itself too (so a lone `ragline serve` on Redis still ingests).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from ragline.checkpoints.streams import StreamManager
from ragline.service.access import NotFoundError
from ragline.service.backend import checkpointer_kind
from ragline.service.ingest_job import IngestJob
from ragline.service.job_queue import JobQueue, LocalJobQueue, RedisJobQueue, run_worker
from ragline.service.jobs import FileJobStore, JobRecord, JobState, JobStore, MemoryJobStore, RedisJobStore
from ragline.services import Services


@dataclass
class JobService:
    store: JobStore
    streams: StreamManager
    queue: JobQueue
    runner: IngestJob
    shared: bool  # jobs run by `ragline worker` processes, not here

    async def submit(self, record: JobRecord, data: bytes) -> JobRecord:
        """Keep the bytes where workers read them, record the job, then queue it (in that order: a worker
        that takes the job at once finds both)."""
        await self.store.put_data(record.id, data)
        stored = await self.runner.publish(record)
        await self.queue.submit(stored)
        return stored

    async def get(self, job_id: str, tenant_id: str, kb_id: str) -> JobRecord:
        """The job, if it belongs to this tenant's knowledge base (another tenant's job is as missing)."""
        record = await self.store.get(job_id)
        if record is None or record.tenant_id != tenant_id or record.knowledge_base_id != kb_id:
            raise NotFoundError(f"job {job_id} not found")
        return record

    async def cancel(self, job_id: str, tenant_id: str, kb_id: str) -> JobRecord:
        """Cancel a waiting or running job; a finished one is returned as it is. A document the job
        already stored stays (ingestion is all-or-nothing: it is either there whole or not at all)."""
        record = await self.get(job_id, tenant_id, kb_id)
        if record.final:
            return record
        stored = await self.runner.publish(record.but(state=JobState.CANCELED, error="canceled"))
        if stored.state == JobState.CANCELED:
            await self.queue.cancel(stored)
            await self.store.drop_data(job_id)
        return stored


def redis_jobs(services: Services, streams: StreamManager) -> tuple[RedisJobStore, RedisJobQueue, IngestJob]:
    """The shared-mode parts over the root's bytes client for jobs (uploads are bytes; saq reads
    bytes): for the service and for `ragline worker` alike."""
    settings = services.settings
    client = services.redis_async("jobs", decode=False)
    store = RedisJobStore(client)
    runner = IngestJob(store, streams, lambda: services.ingestion, settings.job_heartbeat_s, settings.job_stall_s)
    return store, RedisJobQueue(client, settings), runner


@asynccontextmanager
async def open_jobs(services: Services, streams: StreamManager, *, shared: bool) -> AsyncIterator[JobService]:
    settings = services.settings
    if shared:
        store, redis_queue, runner = redis_jobs(services, streams)
        jobs = JobService(store, streams, redis_queue, runner, shared=True)
        stop = asyncio.Event()
        worker = (asyncio.create_task(run_worker(redis_queue, runner, settings, stop=stop, handle_signals=False))
                  if settings.serve_runs_jobs else None)
        try:
            yield jobs
        finally:
            stop.set()
            if worker is not None:
                await asyncio.gather(worker, return_exceptions=True)
            await redis_queue.aclose()
        return
    local_store: JobStore = MemoryJobStore() if checkpointer_kind(settings) == "memory" else FileJobStore(settings.data_dir / "jobs")
    runner = IngestJob(local_store, streams, lambda: services.ingestion, settings.job_heartbeat_s, settings.job_stall_s)
    local_queue = LocalJobQueue(runner.run, settings.job_workers)
    for record in await local_store.unfinished():  # jobs a stopped or killed service left: run them again
        await local_queue.submit(record)
    try:
        yield JobService(local_store, streams, local_queue, runner, shared=False)
    finally:
        await local_queue.aclose()
