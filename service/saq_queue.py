"""saq's Redis queue with two repairs that ingestion jobs need (imported only in shared mode).

1. The sweep must not take a job that a worker has just dequeued. saq moves a job to its active
   list (BLMOVE) and only then marks it active; a sweep in between finds a "queued" job in the
   active list, aborts it and queues it again while the worker starts it (saq issue #277, open in
   0.26): the abort then cancels the live attempt, and the job runs twice. Here a job found in
   the active list without being active is swept only when a later sweep, at least `grace_s`
   later, still finds it so: then its worker died between the two steps.
2. A job the sweep gives up on (its worker died on every attempt) ends as aborted in saq's records
   only; `gave_up` tells the owner, whose own job status would otherwise say "running" for ever.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from saq.job import Status
from saq.queue.redis import RedisQueue
from saq.utils import now as now_ms

log = logging.getLogger(__name__)

# KEYS: the sweep lock, the active list. ARGV: lock seconds. The candidates, as saq's own sweep reads them.
_CANDIDATES = """
local id_jobs = {}
if redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('SETEX', KEYS[1], ARGV[1], 1)
    for i, v in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
        id_jobs[i] = {v, redis.call('GET', v)}
    end
end
return id_jobs
"""

GaveUp = Callable[[str, int], Coroutine[Any, Any, object]]


class SweptQueue(RedisQueue):
    def __init__(self, redis: Any, *, name: str, grace_s: float, gave_up: GaveUp | None = None) -> None:
        super().__init__(redis, name=name)
        self.grace_s = grace_s
        self.gave_up = gave_up
        self._candidates = redis.register_script(_CANDIDATES)
        self._not_active_since: dict[bytes, float] = {}  # job id -> when a sweep first found it inactive in the active list

    def _abandoned(self, job_id: bytes, status: Status, now: float) -> bool:
        if status == Status.ACTIVE:
            self._not_active_since.pop(job_id, None)
            return False
        first_seen = self._not_active_since.setdefault(job_id, now)
        return now - first_seen >= self.grace_s

    async def sweep(self, lock: int = 60, abort: float = 5.0) -> list[str]:
        id_jobs = await self._candidates(keys=[self._sweep, self._active], args=[lock], client=self.redis)
        now = time.monotonic()
        seen = {job_id for job_id, _ in id_jobs}
        self._not_active_since = {k: v for k, v in self._not_active_since.items() if k in seen}
        swept: list[str] = []
        for job_id, job_bytes in id_jobs:
            job = self.deserialize(job_bytes)
            if job is None:  # its record expired: only the list entry is left
                async with self.redis.pipeline(transaction=True) as pipe:
                    pipe.lrem(self._active, 0, job_id)
                    pipe.zrem(self._incomplete, job_id)
                    await pipe.execute()
                swept.append(job_id.decode())
                continue
            if not (job.stuck or self._abandoned(job_id, job.status, now)):
                continue
            log.info("sweeping job %s (%s, last heartbeat %.1f s ago)", job.key, job.status, (now_ms() - job.touched) / 1000)
            swept.append(job_id.decode())
            self._not_active_since.pop(job_id, None)
            await self.abort(job, error=self.swept_error_message)
            try:
                await job.refresh(abort)
            except TimeoutError:
                log.info("could not abort job %s: its worker is gone", job.key)
            if job.retryable:
                await self.retry(job, error=self.swept_error_message)
            else:
                await self.finish(job, Status.ABORTED, error=self.swept_error_message)
                if self.gave_up is not None:
                    await self.gave_up(job.key, job.attempts)
        return swept
