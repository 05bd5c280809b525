"""Ingestion jobs on Redis: real `ragline worker` processes, a SIGKILL mid-document, cancel, fairness.

Redis is a real redis-server (tests/redis_server.py); embeddings come from the scripted server,
slowed down so that a document is still being embedded when the test acts. With RAGLINE_REDIS_URL
the catalog and the vectors live in that Redis too (shared mode), so the test reads what the
workers wrote from there.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from ragline.checkpoints.redis_streams import RedisStreamManager
from ragline.retrieval.catalog import Catalog
from ragline.retrieval.config import RetrievalConfig
from ragline.retrieval.redis_vectors import RedisVectorStore
from ragline.retrieval.stack import open_catalog, open_vector_store
from ragline.retrieval.types import KnowledgeBase
from ragline.service.job_queue import run_worker
from ragline.service.job_service import JobService, open_jobs
from ragline.service.jobs import JOB_LOG, JobRecord, JobState
from ragline.services import Services
from ragline.settings import Settings
from tests.scripted_model import Reply

ROOT = Path(__file__).resolve().parents[2]
SILENT_ROUNDS = 6  # waits of 5 s without any event from a job: it stalled
WORKER_START_MAX_S = 300  # a worker that is still alive and not serving after this is broken, not slow
# 24 paragraphs: two dozen chunks, embedded one per call (batch size 1)
MANUAL = "\n\n".join(f"Step {i}: turn valve {i} of the Aurora pump a quarter turn and check gauge {i} reads {i * 7} kPa." * 4 for i in range(24))


def env_of(redis_url: str, data_dir: Path, scripted: Any) -> dict[str, str]:
    return {
        "RAGLINE_REDIS_URL": redis_url, "RAGLINE_DATA_DIR": str(data_dir),
        "RAGLINE_EMBEDDING_MODEL": "openai/scripted-embed", "RAGLINE_EMBEDDING_API_BASE": scripted.base_url,
        "RAGLINE_EMBEDDING_API_KEY": "scripted-key", "RAGLINE_EMBEDDING_BATCH_SIZE": "1",
        "RAGLINE_CHAT_MODEL": "openai/scripted", "RAGLINE_CHAT_API_BASE": scripted.base_url, "RAGLINE_CHAT_API_KEY": "scripted-key",
        "RAGLINE_SERVE_RUNS_JOBS": "false",  # the enqueuing side here is a service with dedicated workers
        "RAGLINE_JOB_HEARTBEAT_S": "5", "RAGLINE_JOB_SWEEP_S": "1",  # 5 s: a loaded 2-core machine stalls a live worker for seconds
    }


@pytest.fixture
def setup(redis_server, scripted_server, tmp_path: Path) -> Iterator[dict[str, str]]:
    redis_server.flush()
    scripted_server.reset()
    yield env_of(redis_server.url, tmp_path, scripted_server)
    for log in sorted(tmp_path.glob("worker-*.log")):  # shown by pytest when the test failed
        print(f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-60:]))


def settings_of(env: dict[str, str]) -> Settings:
    return Settings(**{key.removeprefix("RAGLINE_").lower(): value for key, value in env.items()})


def shared_catalog(settings: Settings) -> Catalog:
    """The catalog the workers write: in the test's Redis (shared mode)."""
    from ragline.retrieval.redis_connect import connect_search

    return open_catalog(settings.data_dir, connect_search(settings.redis_url or ""))


def new_kb(settings: Settings, name: str, tenant: str = "acme") -> str:
    """A knowledge base written to the shared catalog directly."""
    kb = KnowledgeBase(id=f"kb-{name}", tenant_id=tenant, name=name, embedding_model=settings.embedding_model,
                       embedding_base_url=settings.embedding_api_base or "")
    shared_catalog(settings).insert_kb(kb)
    return kb.id


@contextlib.asynccontextmanager
async def job_service(settings: Settings) -> AsyncIterator[JobService]:
    """The enqueuing side (what `ragline serve` holds in shared mode), without workers of its own."""
    core = Services(settings)
    async with open_jobs(core, RedisStreamManager(core.redis_async("events")), shared=True) as service:
        yield service
    await core.aclose()


@pytest.fixture
async def jobs(setup: dict[str, str]) -> AsyncIterator[JobService]:
    async with job_service(settings_of(setup)) as service:
        yield service


async def submit(jobs: JobService, kb_id: str, text: str, name: str, tenant: str = "acme") -> JobRecord:
    record = JobRecord(id=f"job-{name}", tenant_id=tenant, knowledge_base_id=kb_id, kind="text", title=name, source=f"src:{name}")
    return await jobs.submit(record, text.encode())


async def until(jobs: JobService, job_id: str, done: Any) -> JobRecord:
    """Follow the job's events (blocking reads, no polling) until `done(record)` holds; a job that
    sends nothing for SILENT_ROUNDS waits in a row has stalled (a bug), not slowed down."""
    after, silent = None, 0
    while silent < SILENT_ROUNDS:
        entries = await jobs.streams.wait(JOB_LOG, job_id, after, 5)
        silent = 0 if entries else silent + 1
        for entry in entries:
            after = entry.id
            record = JobRecord.model_validate(entry.event["data"])
            if done(record):
                return record
    raise AssertionError(f"job {job_id} stalled: {await jobs.store.get(job_id)}")


def final(record: JobRecord) -> bool:
    return record.final


async def start_worker(env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A `ragline worker`, once it serves jobs; its log goes to a file of the data directory (a pipe
    nobody reads would block the worker once full), printed by `setup` when a test fails.

    Its start is waited for apart from the job: on a loaded host a worker at nice 10 takes a minute
    to import and open its stores, and that silence is not the job's."""
    path = Path(env["RAGLINE_DATA_DIR"]) / f"worker-{time.monotonic_ns()}.log"
    with open(path, "wb") as log:
        worker = subprocess.Popen([sys.executable, "-m", "ragline", "worker", "--log-level", "info"], cwd=ROOT,
                                  env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + WORKER_START_MAX_S
    while b"Worker starting" not in path.read_bytes():
        assert worker.poll() is None, f"the worker exited with {worker.returncode}"
        assert time.monotonic() < deadline, "the worker did not start"
        await asyncio.sleep(0.1)
    return worker


def stop(worker: subprocess.Popen[bytes]) -> None:
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=15)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


def stored_copies(settings: Settings, kb_id: str, source: str) -> tuple[int, int]:
    """(chunks the catalog lists for the document, vector rows of the knowledge base)."""
    from ragline.retrieval.redis_connect import connect_search
    from tests.vector_rows import vector_row_count

    catalog = shared_catalog(settings)
    document = catalog.find_knowledge(kb_id, source)
    assert document is not None
    vectors = open_vector_store(settings.data_dir, RetrievalConfig.from_settings(settings), connect_search(settings.redis_url or ""))
    assert isinstance(vectors, RedisVectorStore)
    return len(catalog.chunks_of(document.id)), vector_row_count(vectors, kb_id)


async def test_a_worker_killed_mid_document_is_replaced_and_the_document_is_stored_once(jobs, setup, scripted_server):
    settings = settings_of(setup)
    scripted_server.on_embedding(Reply(delay=0.15))
    killed_kb, clean_kb = new_kb(settings, "killed"), new_kb(settings, "clean")
    first = await start_worker(setup)
    try:
        job = await submit(jobs, killed_kb, MANUAL, "manual")
        midway = await until(jobs, job.id, lambda r: r.phase == "embedding" and 2 <= r.done < r.total)
        first.send_signal(signal.SIGKILL)
        first.wait()
        second = await start_worker(setup)
        try:
            done = await until(jobs, job.id, final)
            assert done.state == JobState.DONE and done.attempts >= 2, done  # taken over (more than once if a busy CI stalls a heartbeat)
            assert midway.attempts == 1
            clean = await until(jobs, (await submit(jobs, clean_kb, MANUAL, "manual-clean")).id, final)
            assert clean.state == JobState.DONE and clean.attempts == 1
        finally:
            stop(second)
    finally:
        stop(first)
    assert stored_copies(settings, killed_kb, "src:manual") == stored_copies(settings, clean_kb, "src:manual-clean")
    assert done.document is not None and done.document.chunk_count == clean.document.chunk_count > 10


async def test_a_job_whose_worker_dies_on_every_attempt_ends_failed_with_the_reason(setup, scripted_server):
    """Without this, saq's sweep gives up on the job in its own records only, and the job's
    status (what the page and GET .../jobs/{id} show) says "running" for ever."""
    settings = settings_of(setup).model_copy(update={"job_retries": 1})
    scripted_server.on_embedding(Reply(delay=0.15))
    kb = new_kb(settings, "doomed")
    async with job_service(settings) as jobs:
        first = await start_worker(setup)
        try:
            job = await submit(jobs, kb, MANUAL, "doomed")
            await until(jobs, job.id, lambda r: r.phase == "embedding" and r.done >= 2)
            first.send_signal(signal.SIGKILL)
            first.wait()
            second = await start_worker(setup)  # its sweep finds the dead worker's job, with no attempt left
            try:
                failed = await until(jobs, job.id, final)
            finally:
                stop(second)
        finally:
            stop(first)
        assert failed.state == JobState.FAILED and failed.attempts == 1, failed
        assert "stopped 1 time" in (failed.error or "") and "RAGLINE_JOB_RETRIES" in (failed.error or "")
        assert await jobs.store.data(job.id) is None  # the upload is not kept for a job nobody will run
    assert shared_catalog(settings).find_knowledge(kb, "src:doomed") is None


async def test_a_job_stuck_mid_document_is_retried_and_the_log_shows_where_it_waited(setup, scripted_server, tmp_path):
    """A stuck job (here: the embedding provider goes silent for longer than job_stall_s, well within
    its own timeout) stops its heartbeat; the sweep retries it, and the worker log holds its stack."""
    env = {**setup, "RAGLINE_JOB_STALL_S": "2", "RAGLINE_EMBEDDING_TIMEOUT_S": "120"}
    settings = settings_of(env)
    scripted_server.on_embedding(Reply(delay=60), times=1, when=lambda body: "Step 3:" in str(body.get("input")))
    scripted_server.on_embedding(Reply(delay=0.05))
    kb = new_kb(settings, "stuck")
    async with job_service(settings) as jobs:
        worker = await start_worker(env)
        try:
            done = await until(jobs, (await submit(jobs, kb, MANUAL, "stuck")).id, final)
        finally:
            stop(worker)
    assert done.state == JobState.DONE and done.attempts == 2, done
    log = "\n".join(path.read_text() for path in tmp_path.glob("worker-*.log"))
    assert "made no progress in embedding" in log and "embed_passages" in log  # where it waited


async def test_a_worker_yields_the_cpu_to_answers(setup):
    worker = await start_worker(setup)
    try:
        log = next(iter(Path(setup["RAGLINE_DATA_DIR"]).glob("worker-*.log")))
        for _ in range(300):
            if "serving ingestion jobs" in log.read_text():
                break
            await asyncio.sleep(0.1)
        assert os.getpriority(os.PRIO_PROCESS, worker.pid) == max(10, os.nice(0))  # the default: worker_nice 10
    finally:
        stop(worker)


async def test_a_cancelled_job_stops_where_it_runs_and_a_queued_one_never_starts(jobs, setup, scripted_server):
    settings = settings_of(setup)
    scripted_server.on_embedding(Reply(delay=0.15))
    kb = new_kb(settings, "cancel")
    running, waiting = await submit(jobs, kb, MANUAL, "running"), await submit(jobs, kb, MANUAL + " Later.", "waiting")
    worker = asyncio.create_task(run_worker(jobs.queue, jobs.runner, settings))  # type: ignore[arg-type]
    try:
        await until(jobs, running.id, lambda r: r.phase == "embedding" and r.done >= 1)
        assert (await jobs.cancel(waiting.id, "acme", kb)).state == JobState.CANCELED
        assert (await jobs.cancel(running.id, "acme", kb)).state == JobState.CANCELED
        after = await submit(jobs, kb, "The Aurora pump is blue.", "after")
        assert (await until(jobs, after.id, final)).state == JobState.DONE  # the worker goes on with the next job
    finally:
        worker.cancel()
        await asyncio.gather(worker, return_exceptions=True)
    catalog = shared_catalog(settings)
    assert catalog.find_knowledge(kb, "src:running") is None and catalog.find_knowledge(kb, "src:waiting") is None
    assert (await jobs.store.get(waiting.id)).attempts == 0  # type: ignore[union-attr]
    assert await jobs.store.data(running.id) is None  # the upload is not kept for a canceled job


async def test_one_tenants_backlog_does_not_starve_another_tenants_single_file(jobs, setup):
    settings = settings_of(setup)
    backlog_kb, single_kb = new_kb(settings, "backlog", "acme"), new_kb(settings, "single", "globex")
    backlog = [await submit(jobs, backlog_kb, f"Pump note {i}: the valve {i} is red.", f"a{i}", "acme") for i in range(5)]
    single = await submit(jobs, single_kb, "Globex note: the valve is green.", "b", "globex")
    worker = asyncio.create_task(run_worker(jobs.queue, jobs.runner, settings.model_copy(update={"job_workers": 1})))  # type: ignore[arg-type]
    try:
        done = {job.id: await until(jobs, job.id, final) for job in [*backlog, single]}
    finally:
        worker.cancel()
        await asyncio.gather(worker, return_exceptions=True)
    order = sorted(done, key=lambda job_id: done[job_id].updated_at)
    assert all(record.state == JobState.DONE for record in done.values())
    # round-robin: globex's only job runs right after acme's first two (the one running, the one admitted), not after all five
    assert order.index(single.id) <= 2, order
