"""Ingestion jobs: their record (state, progress, the document made) and where records and uploads wait.

An upload is answered at once (202) with a job; a worker parses, chunks, embeds and indexes it
(service/ingest_job.py) and the job's record tells how far it got. Three stores, chosen like the
service's checkpoints (service/backend.py):

| checkpointer | records | uploaded bytes |
| --- | --- | --- |
| memory | in memory | in memory |
| sqlite (default) | data_dir/jobs/<id>.json | data_dir/jobs/<id>.bin |
| redis (redis_url) | Redis `ragline:job:<id>` | Redis `ragline:job:<id>:data` (an upload is at most UPLOAD_MAX_BYTES) |

A record in a final state (done, failed, canceled) is never overwritten: a worker that reports
progress after a cancel, or a retried attempt after the job finished, changes nothing.
"""

from __future__ import annotations

import asyncio
import os
import time
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from ragline import defaults
from ragline.retrieval.types import Knowledge


class JobState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELED = "canceled"


FINAL = frozenset({JobState.DONE, JobState.FAILED, JobState.CANCELED})


class JobRecord(BaseModel):
    """One document on its way into a knowledge base (GET .../jobs/{id} answers with it)."""

    id: str
    tenant_id: str
    knowledge_base_id: str
    kind: Literal["file", "text"] = Field(description="file: an upload, parsed by its extension; text: plain text.")
    filename: str = Field("", description="The uploaded file's name (no folders).")
    title: str = ""
    source: str = Field(description="What identifies the document: a later job with the same source replaces it.")
    state: JobState = JobState.QUEUED
    phase: str = Field("queued", description="queued, parsing, embedding, indexing, done")
    done: int = Field(0, description="Units of the phase done (embedded chunks).")
    total: int = Field(0, description="Units of the phase (chunks to embed); 0 while unknown.")
    attempts: int = Field(0, description="Attempts started; more than one after a worker died.")
    error: str | None = None
    document: Knowledge | None = Field(None, description="The stored document, once done.")
    created_at: float = Field(default_factory=time.time)
    updated_at: float = Field(default_factory=time.time)

    @property
    def final(self) -> bool:
        return self.state in FINAL

    def but(self, **changes: Any) -> JobRecord:
        """A copy with `changes`, stamped now."""
        return self.model_copy(update={**changes, "updated_at": time.time()})


class JobStore(Protocol):
    async def save(self, record: JobRecord) -> JobRecord:
        """Store `record` unless the stored one is final; returns what is stored."""
        ...

    async def get(self, job_id: str) -> JobRecord | None: ...

    async def put_data(self, job_id: str, data: bytes) -> None: ...

    async def data(self, job_id: str) -> bytes | None: ...

    async def drop_data(self, job_id: str) -> None: ...

    async def unfinished(self) -> list[JobRecord]:
        """Jobs not final, oldest first: an embedded service restarts them (Redis keeps its own queue)."""
        ...


class MemoryJobStore:
    """One process, nothing on disk (checkpointer=memory: tests, throw-away services)."""

    def __init__(self) -> None:
        self._records: dict[str, JobRecord] = {}
        self._data: dict[str, bytes] = {}

    async def save(self, record: JobRecord) -> JobRecord:
        stored = self._records.get(record.id)
        if stored is not None and stored.final:
            return stored
        self._records[record.id] = record
        return record

    async def get(self, job_id: str) -> JobRecord | None:
        return self._records.get(job_id)

    async def put_data(self, job_id: str, data: bytes) -> None:
        self._data[job_id] = data

    async def data(self, job_id: str) -> bytes | None:
        return self._data.get(job_id)

    async def drop_data(self, job_id: str) -> None:
        self._data.pop(job_id, None)

    async def unfinished(self) -> list[JobRecord]:
        return []  # nothing survives the process, so nothing is left to restart


class FileJobStore:
    """Embedded default: a JSON file per job and the upload beside it, so a restarted service resumes them."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock = asyncio.Lock()  # save() reads, compares and writes: one at a time in this process

    def _path(self, job_id: str, suffix: str) -> Path:
        return self.folder / f"{job_id}{suffix}"

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(path.suffix + ".part")
        partial.write_bytes(data)
        os.replace(partial, path)  # a crash never leaves half a record

    def _read(self, job_id: str) -> JobRecord | None:
        path = self._path(job_id, ".json")
        return JobRecord.model_validate_json(path.read_bytes()) if path.is_file() else None

    async def save(self, record: JobRecord) -> JobRecord:
        async with self._lock:
            stored = await asyncio.to_thread(self._read, record.id)
            if stored is not None and stored.final:
                return stored
            await asyncio.to_thread(self._write, self._path(record.id, ".json"), record.model_dump_json().encode())
            return record

    async def get(self, job_id: str) -> JobRecord | None:
        return await asyncio.to_thread(self._read, job_id)

    async def put_data(self, job_id: str, data: bytes) -> None:
        await asyncio.to_thread(self._write, self._path(job_id, ".bin"), data)

    async def data(self, job_id: str) -> bytes | None:
        path = self._path(job_id, ".bin")
        return await asyncio.to_thread(path.read_bytes) if path.is_file() else None

    async def drop_data(self, job_id: str) -> None:
        self._path(job_id, ".bin").unlink(missing_ok=True)

    async def unfinished(self) -> list[JobRecord]:
        def scan() -> list[JobRecord]:
            records = [JobRecord.model_validate_json(p.read_bytes()) for p in self.folder.glob("*.json")] if self.folder.is_dir() else []
            return sorted((r for r in records if not r.final), key=lambda r: r.created_at)

        return await asyncio.to_thread(scan)


# Compare-and-set in one step: a cancel and a worker's progress report may race from two processes.
_SAVE_UNLESS_FINAL = """
local stored = redis.call('GET', KEYS[1])
if stored then
  local state = cjson.decode(stored)['state']
  if state == 'done' or state == 'failed' or state == 'canceled' then return stored end
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return ARGV[1]
"""


class RedisJobStore:
    """Shared mode: records and uploads in Redis, readable by every replica and worker (a bytes client)."""

    def __init__(self, redis: Any, *, prefix: str = "ragline:job", ttl_s: int = defaults.JOB_TTL_S) -> None:
        self.redis, self.prefix, self.ttl_s = redis, prefix, ttl_s
        self._save = redis.register_script(_SAVE_UNLESS_FINAL)

    def _key(self, job_id: str) -> str:
        return f"{self.prefix}:{job_id}"

    async def save(self, record: JobRecord) -> JobRecord:
        stored = await self._save(keys=[self._key(record.id)], args=[record.model_dump_json(), self.ttl_s])
        return JobRecord.model_validate_json(stored)

    async def get(self, job_id: str) -> JobRecord | None:
        stored = await self.redis.get(self._key(job_id))
        return JobRecord.model_validate_json(stored) if stored else None

    async def put_data(self, job_id: str, data: bytes) -> None:
        await self.redis.set(f"{self._key(job_id)}:data", data, ex=self.ttl_s)

    async def data(self, job_id: str) -> bytes | None:
        value = await self.redis.get(f"{self._key(job_id)}:data")
        return bytes(value) if value is not None else None

    async def drop_data(self, job_id: str) -> None:
        await self.redis.delete(f"{self._key(job_id)}:data")

    async def unfinished(self) -> list[JobRecord]:
        return []  # the task queue keeps unfinished jobs itself and hands them to the next worker


JOB_LOG = "jobs"  # the StreamManager "session" every job's progress log lives under


def job_event(record: JobRecord) -> dict[str, Any]:
    """A progress event: the whole record, so any one event tells the full state."""
    return {"response_type": "job", "data": record.model_dump(mode="json")}


def event_is_final(event: dict[str, Any]) -> bool:
    return (event.get("data") or {}).get("state") in {state.value for state in FINAL}
