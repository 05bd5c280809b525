"""What a replica feeds a run it takes over from a dead one.

The run's stream log and its thread's checkpoint say how far it got: an answer already complete
or stopped needs nothing; a thread whose turn is this run's goes on from exactly the checkpoint
found; a thread that never reached the turn restarts it from the stored request.
"""

from __future__ import annotations

from typing import Any

from ragline.checkpoints.streams import StreamManager
from ragline.service import threads
from ragline.service.registry import RunRegistry
from ragline.service.relay import Run
from ragline.service.replay import Transcript
from ragline.service.resume import ResumeFilter

NOTHING_TO_RUN = object()  # the graph input that means: run no graph step


async def takeover_input(run: Run, streams: StreamManager, registry: RunRegistry) -> Any:
    """What to feed the graph: None (continue), the request (restart), or NOTHING_TO_RUN. Sets the
    run's transcript and resume filter, so nothing the dead replica delivered is sent twice."""
    record = run.record
    entries = await streams.read(record.session_id, record.message_id)
    run.transcript = Transcript.of([entry.event for entry in entries])
    run.resume_filter = ResumeFilter(run.transcript)
    if run.transcript.complete:
        run.already_complete = True
        return NOTHING_TO_RUN
    if run.transcript.stopped or await registry.stop_requested([record.message_id]):
        run.context.cancel()
        return NOTHING_TO_RUN
    state = await threads.snapshot(run.driver.graph, record.session_id)  # the run's own graph: its pending tasks
    turn = state.values.get("turn")
    if turn is not None and turn.assistant_message_id == record.assistant_message_id:
        # Finished means no task at all. `next` alone is not enough: a process killed after a
        # node wrote its results but before the next checkpoint leaves next=() with that
        # node's writes pending, and the turn goes on from them.
        if not state.next and not state.tasks:
            return NOTHING_TO_RUN
        run.driver.config = state.config  # from exactly this checkpoint, not from a lagging "latest" pointer
        return None
    return {"request": run.request}
