"""Ingestion job routes: a job's state, its progress as server-sent events, and cancelling it.

An upload (or text document) answers 202 with a job; GET .../jobs/{job_id} tells its state and
progress, GET .../jobs/{job_id}/events streams every change (the whole record in each event, so
a reader that joins late misses nothing) until the job is done, failed or canceled, and
DELETE .../jobs/{job_id} (or POST .../cancel) cancels it. Like every knowledge route, another
tenant's job answers 404.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ragline.api import inputs, sse
from ragline.api.host import HttpHost, host_of
from ragline.api.openapi import doc
from ragline.checkpoints.streams import StreamEntry
from ragline.service.access import Principal
from ragline.service.jobs import JOB_LOG, JobRecord, event_is_final, job_event

TAG = "knowledge"


async def _job(request: Request) -> tuple[HttpHost, Principal, JobRecord]:
    svc = host_of(request)
    who = svc.authenticate(request)
    record = await svc.jobs.get(inputs.path(request, "job_id"), who.tenant_id, inputs.path(request, "kb_id"))
    return svc, who, record


@doc("An ingestion job: state (queued, running, done, failed, canceled), phase and progress, the document once done", TAG,
     response=JobRecord, errors=(401, 404))
async def get_job(request: Request) -> Response:
    _, _, record = await _job(request)
    return JSONResponse(record.model_dump(mode="json"))


@doc("Cancel an ingestion job (a finished one is returned unchanged)", TAG, response=JobRecord, errors=(401, 404))
async def cancel_job(request: Request) -> Response:
    svc, who, record = await _job(request)
    canceled = await svc.jobs.cancel(record.id, who.tenant_id, record.knowledge_base_id)
    return JSONResponse(canceled.model_dump(mode="json"))


async def follow_job(svc: HttpHost, record: JobRecord, after: str | None) -> AsyncIterator[str]:
    """Frames of the job's log from `after` on, until a final state (or the job timeout passes)."""
    streams = svc.jobs.streams
    if record.final and not await streams.read(JOB_LOG, record.id):  # the log expired before the job's record did
        yield sse.frame(record.id, StreamEntry("0", job_event(record)))
        return
    deadline = time.monotonic() + svc.settings.job_timeout_s
    while time.monotonic() < deadline:
        entries = await streams.wait(JOB_LOG, record.id, after, svc.settings.sse_heartbeat_s)
        if not entries:
            yield ": ping\n\n"
            continue
        for entry in entries:
            yield sse.frame(record.id, entry)
            if event_is_final(entry.event):
                return
        after = entries[-1].id


@doc("The job's progress as server-sent events (each event carries the whole job), ending with its final state", TAG,
     sse=True, events=JobRecord, errors=(401, 404))
async def job_events(request: Request) -> Response:
    svc, _, record = await _job(request)  # takes ?api_key= too (auth.QUERY_KEY_ROUTES): an EventSource cannot send headers
    resume = sse.last_event_id(request, svc.jobs.streams)
    after = resume[1] if resume is not None and resume[0] == record.id else None
    return sse.sse_response(sse.with_retry(follow_job(svc, record, after)))  # retry: rides on the first event
