"""A run being driven (Run), what of its events a client may see, and StageEvents, which takes a
run's events from its stages straight into the answer's stream log.

The HTTP service gives each run an ExclusiveSink: `events.emit` appends an event where the stage
emits it, instead of writing it to LangGraph's custom stream for the run's driver to read back and
append. Per answer token, that is a task switch and a pass through LangGraph's stream machinery
fewer between the model's chunk and the client's frame (benchmarks/load.py, N = 200: about a fifth
less server CPU per token). The in-process log appends at once; the Redis log queues the event for
its next batch of appends (`append_soon`), and the run learns how that went before it finishes
(`StageEvents.delivered`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from ragline.checkpoints.streams import Event, Fence, FenceLost, StreamManager
from ragline.contracts.context import ExclusiveSink, RunContext
from ragline.contracts.events import ResponseType, StreamResponse, as_json
from ragline.contracts.request import PipelineRequest
from ragline.graph.turn import TurnDriver
from ragline.service.registry import RunRecord
from ragline.service.replay import Transcript
from ragline.service.resume import ResumeFilter
from ragline.service.start_slots import StartSlot

TEXT_DELTAS = (ResponseType.ANSWER.value, ResponseType.THINKING.value)


@dataclass
class Run:
    record: RunRecord
    driver: TurnDriver
    request: PipelineRequest  # validated once, when the turn was submitted (or read back on takeover)
    transcript: Transcript = field(default_factory=Transcript)
    resume_filter: ResumeFilter | None = None
    task: asyncio.Task[None] | None = None
    hard_cancelled: bool = False
    lease_lost: bool = False
    already_complete: bool = False
    finishing: bool = False
    ended: bool = False  # the graph reached its end: no failure, no stop, no timeout
    stage_events: StageEvents | None = None  # the sink the stages emit into, when the run has one
    start_slot: StartSlot | None = None  # held from the start of the run until its answer streams
    fence: Fence | None = None  # what its appends check: that this replica still holds the run

    def lose_lease(self) -> None:
        """Another replica holds the run now: end this copy of it without a word more to its log."""
        self.lease_lost = True
        if self.task is not None and not self.task.done():
            self.task.cancel()

    @property
    def context(self) -> RunContext:
        return self.driver.context

    @property
    def cancelled(self) -> bool:
        return self.context.is_cancelled()

    def admit(self, event: Event) -> Event | None:
        """The event as the client may see it, or None: what a resumed run repeats is dropped, and
        no answer text goes out after a stop. The answer's first text frees the run's start slot."""
        if self.start_slot is not None and event.get("response_type") in TEXT_DELTAS:
            self.start_slot.free()
        if self.resume_filter is not None:
            filtered = self.resume_filter(event)
            if filtered is None:
                return None
            event = filtered
        if self.cancelled and event.get("response_type") in TEXT_DELTAS and event.get("content"):
            return None  # the stop wins: nothing is shown after it
        return event


class StageEvents(ExclusiveSink):
    def __init__(self, streams: StreamManager, run: Run) -> None:
        self.streams = streams
        self.run = run
        self._last: asyncio.Future[str] | None = None  # appends go out in order: when it is done, all are
        self._failure: BaseException | None = None

    def __call__(self, event: Any) -> None:
        as_dict: Event = as_json(event) if isinstance(event, StreamResponse) else event
        run = self.run
        run.driver.see(as_dict.get("response_type", ""), as_dict.get("data"))  # failures and open cards, as if the driver read it
        admitted = run.admit(as_dict)
        if admitted is not None:
            sent = self.streams.append_soon(run.record.session_id, run.record.message_id, admitted, run.fence)
            if sent is not None:
                self._last = sent
                sent.add_done_callback(self._check)
            run.transcript.add(admitted)

    def _check(self, sent: asyncio.Future[str]) -> None:
        failure = None if sent.cancelled() else sent.exception()  # read either way: no "never retrieved" warning
        if isinstance(failure, FenceLost):
            self.run.lose_lease()
        if self._failure is None:
            self._failure = failure

    async def delivered(self) -> None:
        """Once every event emitted so far is in the log; raises the first append that failed."""
        if self._last is not None:
            await asyncio.wait([self._last])
        if self._failure is not None:
            raise self._failure
