"""Server-sent events over the StreamManager: EventSource-compatible frames, resume, heartbeats.

Every frame is `id: <message id>:<entry id>`, `event: message`, `data: <StreamResponse JSON>`, so
a reconnecting client's Last-Event-ID names both the answer and the exact event it saw last.
Quiet streams get a `: ping` comment every heartbeat. A stream ends after `complete`; when the
turn opened a new session, it first waits up to TITLE_WAIT_AFTER_COMPLETE_S for `session_title`.
The reconnect delay (`retry:`) is the first line of the first event's frame, never a frame of its
own: a frame without data is an event with empty data to clients such as httpx-sse.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import StreamingResponse

from ragline import defaults
from ragline.api.errors import ApiError
from ragline.checkpoints.streams import StreamEntry, StreamManager
from ragline.contracts.events import ResponseType
from ragline.service.replay import coalesce

HEADERS = {"Cache-Control": "no-cache", "Connection": "keep-alive", "X-Accel-Buffering": "no"}
RETRY = f"retry: {defaults.SSE_RETRY_MS}\n"  # no blank line after it: it opens the first event's frame


def event_id(message_id: str, entry_id: str) -> str:
    return f"{message_id}:{entry_id}"


def frame(message_id: str, entry: StreamEntry) -> str:
    data = json.dumps(entry.event, ensure_ascii=False, separators=(",", ":"))
    return f"id: {event_id(message_id, entry.id)}\nevent: message\ndata: {data}\n\n"


def last_event_id(request: Request, streams: StreamManager) -> tuple[str, str] | None:
    """(message id, entry id) from the Last-Event-ID header, or None when absent."""
    value = request.headers.get("last-event-id", "").strip()
    if not value:
        return None
    message_id, _, entry_id = value.rpartition(":")
    if not message_id or not streams.valid_id(entry_id):
        raise ApiError("Last-Event-ID is not an event id of this service")
    return message_id, entry_id


class _Progress:
    """What the reader has seen: the end, and whether a session title is still to come."""

    def __init__(self) -> None:
        self.title_pending = False
        self.title_seen = False
        self.complete_at: float | None = None

    def see(self, entry: StreamEntry) -> None:
        kind = entry.event.get("response_type")
        if kind == ResponseType.AGENT_QUERY.value:
            self.title_pending = bool((entry.event.get("data") or {}).get("title_pending"))
        elif kind == ResponseType.SESSION_TITLE.value:
            self.title_seen = True
        elif kind == ResponseType.COMPLETE.value and self.complete_at is None:
            self.complete_at = time.monotonic()

    def finished(self) -> bool:
        if self.complete_at is None:
            return False
        if not self.title_pending or self.title_seen:
            return True
        return time.monotonic() - self.complete_at >= defaults.TITLE_WAIT_AFTER_COMPLETE_S

    def wait_budget(self, heartbeat_s: float) -> float:
        if self.complete_at is None:
            return heartbeat_s
        return max(0.01, defaults.TITLE_WAIT_AFTER_COMPLETE_S - (time.monotonic() - self.complete_at))


async def with_retry(writes: AsyncIterator[str]) -> AsyncIterator[str]:
    """`writes`, the reconnect delay written just before the first event's frame. Comments before
    it pass alone: `retry:` in a comment's block would make that block an event without data."""
    pending = True
    async for write in writes:
        if pending and not write.startswith(":"):
            yield RETRY
            pending = False
        yield write


def follow(
    streams: StreamManager,
    session_id: str,
    message_id: str,
    *,
    after: str | None = None,
    coalesce_replay: bool = False,
    heartbeat_s: float = defaults.SSE_HEARTBEAT_S,
) -> AsyncIterator[str]:
    """Frames of one answer from `after` on, until complete (and the title, for a new session)."""
    return with_retry(_frames(streams, session_id, message_id, after, coalesce_replay, heartbeat_s))


async def _frames(streams: StreamManager, session_id: str, message_id: str, after: str | None, coalesce_replay: bool,
                  heartbeat_s: float) -> AsyncIterator[str]:
    progress = _Progress()
    if after is not None:  # a resumed reader learns what it saw before from the log itself
        for entry in await streams.read(session_id, message_id):
            progress.see(entry)
            if entry.id == after:
                break
    if coalesce_replay:
        backlog = await streams.read(session_id, message_id, after)
        for entry in backlog:
            progress.see(entry)
        if backlog:
            yield "".join(frame(message_id, entry) for entry in coalesce(backlog))
        after = backlog[-1].id if backlog else after
    deadline = time.monotonic() + defaults.RUN_MAX_S
    while not progress.finished() and time.monotonic() < deadline:
        entries = await streams.wait(session_id, message_id, after, progress.wait_budget(heartbeat_s))
        if not entries:
            if progress.complete_at is None:
                yield ": ping\n\n"
            continue
        for entry in entries:
            progress.see(entry)
        # One write for everything that arrived since the last wake: a reader that fell behind
        # catches up in one pass through the middleware and the socket, not one per event.
        yield "".join(frame(message_id, entry) for entry in entries)
        after = entries[-1].id


def sse_response(frames: AsyncIterator[str]) -> StreamingResponse:
    return StreamingResponse(frames, media_type="text/event-stream", headers=HEADERS)
