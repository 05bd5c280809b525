"""The embedded job queue: tenants served round-robin, bounded concurrency, cancel waiting or running."""

from __future__ import annotations

import asyncio

from ragline.service.job_queue import LocalJobQueue
from ragline.service.jobs import JobRecord


def job(tenant: str, name: str) -> JobRecord:
    return JobRecord(id=name, tenant_id=tenant, knowledge_base_id="kb", kind="text", source=name)


class Recorder:
    """A job function that records the order jobs start in and holds each until released."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.running = 0
        self.most = 0
        self.gate = asyncio.Event()

    async def __call__(self, job_id: str) -> None:
        self.started.append(job_id)
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await self.gate.wait()
        finally:
            self.running -= 1


async def drained(queue: LocalJobQueue, recorder: Recorder, count: int) -> None:
    recorder.gate.set()
    while len(recorder.started) < count or recorder.running:
        await asyncio.sleep(0)  # the workers run on this loop: give them turns until all have run


async def test_one_tenants_backlog_does_not_starve_another_tenants_single_job():
    recorder = Recorder()
    queue = LocalJobQueue(recorder, workers=1)
    for i in range(5):
        await queue.submit(job("acme", f"a{i}"))
    await queue.submit(job("globex", "b0"))
    await drained(queue, recorder, 6)
    await queue.aclose()
    assert recorder.started.index("b0") <= 2, recorder.started  # a FIFO would run it last
    assert [j for j in recorder.started if j.startswith("a")] == ["a0", "a1", "a2", "a3", "a4"]  # each tenant in its own order


async def test_no_more_jobs_run_at_once_than_workers():
    recorder = Recorder()
    queue = LocalJobQueue(recorder, workers=2)
    for i in range(6):
        await queue.submit(job(f"t{i}", f"j{i}"))
    while len(recorder.started) < 2:
        await asyncio.sleep(0)
    for _ in range(100):  # turns enough for a third worker, were there one, to start a job
        await asyncio.sleep(0)
    assert recorder.started == ["j0", "j1"] and recorder.running == 2
    await drained(queue, recorder, 6)
    await queue.aclose()
    assert recorder.most == 2


async def test_a_waiting_job_is_cancelled_before_it_starts_and_a_running_one_where_it_runs():
    recorder = Recorder()
    queue = LocalJobQueue(recorder, workers=1)
    await queue.submit(job("acme", "running"))
    await queue.submit(job("acme", "waiting"))
    while not recorder.started:
        await asyncio.sleep(0)
    await queue.cancel(job("acme", "waiting"))
    await queue.cancel(job("acme", "running"))
    await queue.submit(job("acme", "next"))
    await drained(queue, recorder, 2)
    await queue.aclose()
    assert recorder.started == ["running", "next"]
