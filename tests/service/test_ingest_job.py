"""service/ingest_job.py: a finished job never waits on its progress reporter."""

from __future__ import annotations

import asyncio

from ragline.checkpoints.streams import MemoryStreamManager
from ragline.retrieval.types import Knowledge
from ragline.service.ingest_job import IngestJob
from ragline.service.jobs import JobRecord, JobState, MemoryJobStore


class IngestionDone:
    """Stands in for the ingestion service: the document is stored at the moment `ready` is set."""

    def __init__(self, ready: asyncio.Event) -> None:
        self.ready = ready

    async def ingest_documents(self, kb_id: str, documents: list, tenant_id: str, progress) -> list[Knowledge]:
        progress(1, 1)
        await self.ready.wait()
        return [Knowledge(id="doc", knowledge_base_id=kb_id, tenant_id=tenant_id, title="t", chunk_count=1)]


async def test_a_job_finishes_when_its_reporter_loses_the_cancellation():
    """As on Python 3.11 when a cancel meets a Redis client's socket timeout: the error is retried
    and the cancellation is gone. The job must end all the same, not at the stall watchdog."""
    touching = asyncio.Event()

    async def touch_that_loses_a_cancel() -> None:
        touching.set()
        try:
            await asyncio.sleep(0.5)
        except asyncio.CancelledError:
            await asyncio.sleep(0.5)  # the retried call: the cancellation is lost

    store = MemoryJobStore()
    await store.save(JobRecord(id="j1", tenant_id="default", knowledge_base_id="kb", kind="text", source="s"))
    await store.put_data("j1", b"some text")
    job = IngestJob(store, MemoryStreamManager(), lambda: IngestionDone(touching),  # type: ignore[arg-type,return-value]
                    heartbeat_s=0.03, stall_s=600)
    async with asyncio.timeout(10):  # before the fix: until stall_s, 600 s
        final = await job.run("j1", touch=touch_that_loses_a_cancel)
    assert final is not None and final.state == JobState.DONE and final.document is not None
    assert (await store.get("j1")).state == JobState.DONE


async def test_a_job_finishes_when_its_reporter_hangs_in_a_call():
    touching, released = asyncio.Event(), asyncio.Event()

    async def touch_that_hangs() -> None:
        touching.set()
        try:
            await asyncio.sleep(0.5)
        except asyncio.CancelledError:
            await released.wait()  # lost the cancellation, and the call never returns

    store = MemoryJobStore()
    await store.save(JobRecord(id="j2", tenant_id="default", knowledge_base_id="kb", kind="text", source="s"))
    await store.put_data("j2", b"some text")
    job = IngestJob(store, MemoryStreamManager(), lambda: IngestionDone(touching),  # type: ignore[arg-type,return-value]
                    heartbeat_s=0.03, stall_s=600)
    try:
        async with asyncio.timeout(10):  # REPORTER_STOP_S (5 s) at most
            final = await job.run("j2", touch=touch_that_hangs)
        assert final is not None and final.state == JobState.DONE
    finally:
        released.set()


async def test_a_job_cancelled_while_parsing_stops_the_parsing_thread(monkeypatch):
    """The parse runs in a worker thread that a task's cancellation cannot stop; the job sets the
    parse's stop event, so the thread ends at its next piece of text instead of at the file's end."""
    import threading

    from ragline.service import ingest_job

    parsing, parsed, seen_stop = threading.Event(), threading.Event(), []

    def slow_parse(record, data, stop):
        parsing.set()
        seen_stop.append(stop.wait(timeout=10))  # a long parse, checking its stop between pieces
        parsed.set()
        raise AssertionError("the job was cancelled: nothing reads this")

    monkeypatch.setattr(ingest_job, "document_of", slow_parse)
    store = MemoryJobStore()
    await store.save(JobRecord(id="j3", tenant_id="default", knowledge_base_id="kb", kind="file", filename="big.docx", source="s"))
    await store.put_data("j3", b"PK")
    job = IngestJob(store, MemoryStreamManager(), lambda: IngestionDone(asyncio.Event()),  # type: ignore[arg-type,return-value]
                    heartbeat_s=0.03, stall_s=600)
    running = asyncio.create_task(job.run("j3"))
    await asyncio.to_thread(parsing.wait, 10)
    running.cancel()
    await asyncio.gather(running, return_exceptions=True)
    await asyncio.to_thread(parsed.wait, 15)
    assert seen_stop == [True]  # the parse was told to stop (before the fix it ran to its 10 s end: [False])


class IngestionIntoFullRedis:
    """Stores the document's chunks in a Redis that is full: the write is refused as a real one is."""

    def __init__(self, redis) -> None:
        self.redis = redis

    async def ingest_documents(self, kb_id: str, documents: list, tenant_id: str, progress) -> list[Knowledge]:
        progress(0, 3)
        await self.redis.set("chunk:doc:1", "x" * 65536)
        raise AssertionError("the Redis of this test must be full")


async def test_a_job_that_meets_a_full_redis_keeps_its_upload_and_is_done_when_retried_after(redis_server):
    """Before: the job was marked failed (a write that fails too), its upload deleted (a DEL passes
    at maxmemory), and the queue's retry after recovery said "the uploaded data ... is gone"."""
    import pytest
    from redis.asyncio import Redis
    from redis.exceptions import OutOfMemoryError

    from ragline.service.jobs import RedisJobStore

    redis_server.flush()
    redis = Redis.from_url(redis_server.url)  # bytes, as the job store's client (uploads are bytes)
    store = RedisJobStore(redis, prefix="full-test")
    await store.save(JobRecord(id="j3", tenant_id="default", knowledge_base_id="kb", kind="text", source="s"))
    await store.put_data("j3", b"The Aurora pump moves coolant.")
    used = int((await redis.info("memory"))["used_memory"])
    await redis.config_set("maxmemory-policy", "noeviction")
    await redis.config_set("maxmemory", used + 32 * 1024)
    try:
        job = IngestJob(store, MemoryStreamManager(), lambda: IngestionIntoFullRedis(redis),  # type: ignore[arg-type,return-value]
                        heartbeat_s=0.03, stall_s=600)
        with pytest.raises(OutOfMemoryError):  # to the queue, which retries the job
            await job.run("j3")
        assert await store.data("j3") == b"The Aurora pump moves coolant."
    finally:
        await redis.config_set("maxmemory", 0)
    retried = IngestJob(store, MemoryStreamManager(), lambda: IngestionDone(_set(asyncio.Event())),  # type: ignore[arg-type,return-value]
                        heartbeat_s=0.03, stall_s=600)
    final = await retried.run("j3")
    assert final is not None and final.state == JobState.DONE and final.attempts == 2
    await redis.aclose()


def _set(event: asyncio.Event) -> asyncio.Event:
    event.set()
    return event


async def test_a_job_that_cannot_save_its_progress_tells_its_readers_why(redis_server):
    """Before: "embedding 0 of 1,060" for minutes, no reason. The reader here follows the job from
    another stream manager (another replica's), as a client of the job's events does."""
    import pytest
    from redis.asyncio import Redis
    from redis.exceptions import OutOfMemoryError

    from ragline.checkpoints.redis_streams import RedisStreamManager
    from ragline.service.ingest_job import STORE_FULL
    from ragline.service.jobs import JOB_LOG, RedisJobStore

    redis_server.flush()
    redis = Redis.from_url(redis_server.url)
    store = RedisJobStore(redis, prefix="told-test")
    await store.save(JobRecord(id="j4", tenant_id="default", knowledge_base_id="kb", kind="text", source="s"))
    await store.put_data("j4", b"The Aurora pump moves coolant.")
    worker_streams, replica_streams = RedisStreamManager(Redis.from_url(redis_server.url)), RedisStreamManager(Redis.from_url(redis_server.url))
    reader = asyncio.create_task(replica_streams.wait(JOB_LOG, "j4", "0-0", 30))
    await asyncio.sleep(0.5)  # the reader waits, and its process listens for what others tell
    used = int((await redis.info("memory"))["used_memory"])
    await redis.config_set("maxmemory-policy", "noeviction")
    await redis.config_set("maxmemory", used)
    try:
        job = IngestJob(store, worker_streams, lambda: IngestionDone(_set(asyncio.Event())),  # type: ignore[arg-type,return-value]
                        heartbeat_s=0.03, stall_s=600)
        with pytest.raises(OutOfMemoryError):
            await job.run("j4")
        [told] = await asyncio.wait_for(reader, 10)
    finally:
        await redis.config_set("maxmemory", 0)
    assert told.id == "0-0" and told.event["data"]["error"] == STORE_FULL and told.event["data"]["state"] == "running"
    assert await store.data("j4") == b"The Aurora pump moves coolant."
    for closing in (worker_streams, replica_streams):
        await closing.aclose()
    await redis.aclose()
