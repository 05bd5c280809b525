"""StageEvents: a run's events go from its stages straight into the answer's stream log.

With the in-process log, whose append never waits, the HTTP service gives each run an
ExclusiveSink: `events.emit` appends an event where the stage emits it, instead of writing it to
LangGraph's custom stream for the run's driver to read back and append. Per answer token, that is
a task switch and a pass through LangGraph's stream machinery fewer between the model's chunk and
the client's frame (benchmarks/load.py, N = 200: about a fifth less server CPU per token). The
Redis log is still written by the driver: its appends are network calls, which a stage's
synchronous emit cannot wait for.
"""

from __future__ import annotations

from typing import Any, Protocol

from ragline.checkpoints.streams import Event, MemoryStreamManager
from ragline.graph.context import ExclusiveSink
from ragline.graph.events import StreamResponse
from ragline.graph.turn import TurnDriver
from ragline.service.replay import Transcript


class AdmittingRun(Protocol):
    """The run the events belong to: its driver tracks them, `admit` filters them, its transcript records what went out."""

    @property
    def driver(self) -> TurnDriver: ...

    @property
    def transcript(self) -> Transcript: ...

    def admit(self, event: Event) -> Event | None: ...


class StageEvents(ExclusiveSink):
    def __init__(self, streams: MemoryStreamManager, session_id: str, message_id: str, run: AdmittingRun) -> None:
        self.streams = streams
        self.session_id = session_id
        self.message_id = message_id
        self.run = run

    def __call__(self, event: Any) -> None:
        as_dict: Event = event.model_dump(mode="json", exclude_none=True) if isinstance(event, StreamResponse) else event
        run = self.run
        run.driver.see(as_dict.get("response_type", ""), as_dict.get("data"))  # failures and open cards, as if the driver read it
        admitted = run.admit(as_dict)
        if admitted is not None:
            self.streams.append_now(self.session_id, self.message_id, admitted)
            run.transcript.add(admitted)
