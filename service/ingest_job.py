"""The ingestion job: one uploaded file (or text) parsed, chunked, embedded and indexed, with progress.

The same function runs in `ragline worker` processes (shared mode, service/job_queue.py) and in
the service's own event loop (embedded mode). CPU work stays off the event loop: parsing runs in
a thread here, chunking and OCR in threads inside the ingestion service, and local embeddings in
the embedding engine's own thread, so answers streamed by the same process keep flowing.

A job is idempotent by document revision: its new ids derive from the job id
(ingestion/ids.py), the catalog swaps the document's chunks in one transaction, and a document
whose content hash is stored already is skipped. Run twice, by a retry after a dead worker, it
leaves exactly one copy.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from ragline import defaults
from ragline.checkpoints.streams import StreamManager
from ragline.ingestion.ids import revision_ids
from ragline.ingestion.service import IngestionService, TextDocument
from ragline.redis_clients import out_of_memory
from ragline.retrieval.errors import RetrievalError
from ragline.service.jobs import JOB_LOG, JobRecord, JobState, JobStore, job_event

log = logging.getLogger(__name__)
Touch = Callable[[], Awaitable[None]]  # tells the task queue the job is alive (saq's heartbeat)
REPORTER_STOP_S = 5.0  # the longest a finished job waits for its progress reporter to stop


def precheck(data: bytes, filename: str) -> None:
    """The cheap part of parsing, done before an upload is queued: an unsupported, empty, binary or
    bomb-like file is refused at once (4xx) instead of failing its job later."""
    from ragline.ingestion.images import IMAGE_TYPES, inspect_image
    from ragline.ingestion.parsers import SUPPORTED, check_archive, check_text, decode_text
    from ragline.retrieval.errors import IngestionError

    kind = Path(filename).suffix.lower().lstrip(".")
    if kind not in SUPPORTED:
        raise IngestionError(f"unsupported file type '{kind}' (supported: {', '.join(SUPPORTED)})")
    if kind in IMAGE_TYPES:
        inspect_image(data, filename, Path(filename).stem, filename)
    elif kind in ("docx", "xlsx"):
        check_archive(data, filename)
    elif kind != "pdf":
        check_text(decode_text(data), filename)


def document_of(record: JobRecord, data: bytes, stop: threading.Event | None = None) -> TextDocument:
    """The job's document: the file parsed by its extension in a child process (until `stop` is set;
    its memory bounded and given back, ingestion/isolated.py), or the text as it is."""
    if record.kind == "text":
        return TextDocument(data.decode(), record.title, record.source, "txt")
    from ragline.ingestion.isolated import parse_isolated

    parsed = parse_isolated(data, Path(record.filename).suffix, record.filename, stop)
    return TextDocument.parsed(parsed, record.title or parsed.title or Path(record.filename).stem, record.source)


def awaiting(coro: object) -> list[str]:
    """The chain of awaits a suspended coroutine is in, outermost first, down to what it waits on
    (a task's own stack shows only its outermost frame)."""
    lines: list[str] = []
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "ag_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:  # a future, a task or a finished coroutine: what the chain waits on
            lines.append(f"  waiting on {coro!r}"[:500])
            break
        lines.append(f'  File "{frame.f_code.co_filename}", line {frame.f_lineno}, in {frame.f_code.co_name}')
        coro = getattr(coro, "cr_await", None) or getattr(coro, "ag_await", None) or getattr(coro, "gi_yieldfrom", None)
    return lines


class _Progress:
    """Collects the ingestion's progress callbacks (called from any thread) for the reporter to publish."""

    def __init__(self) -> None:
        self.done = self.total = 0
        self.ended = False  # the ingestion returned: the reporter stops at its next turn, cancelled or not

    def __call__(self, done: int, total: int) -> None:
        self.done, self.total = done, total

    def phase(self) -> str:
        if not self.total:
            return "parsing"
        return "embedding" if self.done < self.total else "indexing"


async def _stop(reporter: asyncio.Task[None], progress: _Progress) -> None:
    """End the reporter without waiting on it for long.

    A benchmark job, its document stored, hung here until the stall watchdog ended the reporter
    600 s later: the reporter had gone on touching the heartbeat after it was cancelled, so the
    cancellation was lost on its way. The likeliest path (not reproduced alone): in a Redis call,
    on Python 3.11, a cancel that lands as the client's socket timeout expires becomes a
    TimeoutError, which the client retries. Now the reporter also stops at its next turn on
    `ended`, and the job goes on after REPORTER_STOP_S whatever the reporter does.
    """
    progress.ended = True
    reporter.cancel()
    await asyncio.wait({reporter}, timeout=REPORTER_STOP_S)
    if not reporter.done():
        log.warning("the progress reporter of a job did not stop when cancelled; it ends at its next turn")


STORE_FULL = ("the service's store (Redis) is full (maxmemory reached): this job's progress cannot be saved; it goes on "
              "from its upload once an operator frees memory or raises maxmemory")


class IngestJob:
    """Runs jobs by id against one IngestionService, publishing each change of the record."""

    def __init__(self, store: JobStore, streams: StreamManager, ingestion: Callable[[], IngestionService],
                 heartbeat_s: float = defaults.JOB_HEARTBEAT_S, stall_s: float = defaults.JOB_STALL_S) -> None:
        self.store, self.streams = store, streams
        self.heartbeat_s = heartbeat_s  # the job's heartbeat is sent three times per period: one late touch is no death
        self.stall_s = stall_s  # embedding or indexing without progress this long: the heartbeat stops, the queue retries
        self._ingestion = ingestion  # opens the stores on first use (in a thread: it opens Chroma)

    async def publish(self, record: JobRecord) -> JobRecord:
        """Store the record and append it to the job's event log; returns what is stored (a cancel wins).
        When Redis is full, nothing can be stored: the job's readers are told why, and it raises."""
        try:
            stored = await self.store.save(record)
        except Exception as exc:
            if out_of_memory(exc):
                waiting = record.but(error=STORE_FULL)
                await self.streams.tell(JOB_LOG, record.id, job_event(waiting))
            raise
        if stored.updated_at == record.updated_at and stored.state == record.state:
            await self.streams.append(JOB_LOG, record.id, job_event(stored))
        return stored

    async def run(self, job_id: str, touch: Touch | None = None) -> JobRecord | None:
        record = await self.store.get(job_id)
        if record is None or record.final:  # canceled before it started, or finished by an earlier attempt
            return record
        record = await self.publish(record.but(state=JobState.RUNNING, phase="parsing", done=0, total=0,
                                               attempts=record.attempts + 1, error=None))
        if record.final:
            return record
        progress = _Progress()
        reporter = asyncio.create_task(self._report(record, progress, touch, asyncio.current_task()))
        try:
            final = await self._ingest(record, progress)
        finally:
            await _stop(reporter, progress)
        await self.store.drop_data(job_id)
        return await self.publish(final)

    async def gave_up(self, job_id: str, attempts: int) -> None:
        """The task queue stopped retrying the job (its worker died on every attempt): it failed."""
        record = await self.store.get(job_id)
        if record is None or record.final:  # canceled (a cancel aborts too), or finished after all
            return
        log.error("ingestion job %s failed: its worker died %d times", job_id, attempts)
        await self.publish(record.but(state=JobState.FAILED, error=(
            f"the worker running this job stopped {attempts} time(s) (killed, or silent longer than job_heartbeat_s); "
            "it is not retried again: upload the document again, or raise RAGLINE_JOB_RETRIES")))
        await self.store.drop_data(job_id)

    async def _ingest(self, record: JobRecord, progress: _Progress) -> JobRecord:
        """The document stored: a done record; a document that cannot be stored: a failed one (no retry
        would change that). Only a dead worker's job is retried, by the task queue."""
        try:
            data = await self.store.data(record.id)
            if data is None:
                raise RetrievalError("the uploaded data of this job is gone (expired or deleted); upload the document again")
            stop = threading.Event()
            try:
                document = await asyncio.to_thread(document_of, record, data, stop)
            finally:
                stop.set()  # cancelled meanwhile: the parsing thread ends at its next piece of text, not at the file's end
            ingestion = await asyncio.to_thread(self._ingestion)
            with revision_ids(record.id):
                [knowledge] = await ingestion.ingest_documents(record.knowledge_base_id, [document], record.tenant_id, progress=progress)
        except Exception as exc:
            if out_of_memory(exc):  # also wrapped by a store: no record can be written either, so the queue retries the job from its upload
                log.warning("ingestion job %s stopped: Redis is full (maxmemory); it is retried from its upload", record.id)
                raise
            if isinstance(exc, RetrievalError | UnicodeDecodeError):  # IngestionError and DocumentTooLargeError among them
                return record.but(state=JobState.FAILED, error=str(exc))
            log.exception("ingestion job %s failed", record.id)  # a broken store or model: reported on the job, its traceback here
            return record.but(state=JobState.FAILED, error=f"{type(exc).__name__}: {exc}")
        return record.but(state=JobState.DONE, phase="done", done=progress.total, total=progress.total, document=knowledge)

    async def _report(self, record: JobRecord, progress: _Progress, touch: Touch | None, job: asyncio.Task | None) -> None:
        """Publish progress when it changed (at most every JOB_PROGRESS_S) and keep the job's heartbeat.

        A publish that finds the job canceled (from another process) cancels the work here.
        """
        shown = (record.phase, 0, 0)
        touched = moved = time.monotonic()
        stalled = False
        while True:
            await asyncio.sleep(defaults.JOB_PROGRESS_S)
            if progress.ended:  # also when a cancellation never arrived (see _stop)
                return
            now = (progress.phase(), progress.done, progress.total)
            if now != shown:
                shown, moved = now, time.monotonic()
                stored = await self.publish(record.but(phase=now[0], done=now[1], total=now[2]))
                if stored.state == JobState.CANCELED and job is not None:
                    job.cancel()
                    return
            # parsing reports no progress (a long PDF may take minutes): only embedding and indexing are judged
            if progress.total and not stalled and time.monotonic() - moved >= self.stall_s:
                stalled = True
                self._stalled(record, now[0], job, retried=touch is not None)
                if touch is not None:
                    return  # no more heartbeats: the queue's sweep takes the job for dead, aborts and retries it
            if touch is not None and time.monotonic() - touched >= self.heartbeat_s / 3:
                touched = time.monotonic()
                await touch()

    def _stalled(self, record: JobRecord, phase: str, job: asyncio.Task | None, *, retried: bool) -> None:
        """Log where the job waits: the one clue to a hang."""
        then = "its heartbeat stops so that the queue retries it" if retried else "it goes on waiting"
        log.error("ingestion job %s made no progress in %s for %.0f s (attempt %d); %s. It waits here:\n%s",
                  record.id, phase, self.stall_s, record.attempts, then, "\n".join(awaiting(job.get_coro()) if job else []))
