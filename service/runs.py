"""RunManager: graph runs decoupled from connections (seed: qa.go setupSSEStream + AgentStreamHandler).

A request starts a run as a background task and gets its ids back; the run appends every event
to the StreamManager, where any SSE response — on any replica — reads it (the stages' events go
in as they are emitted: service/relay.py). The run outlives its
client: a refresh or a dropped connection resumes from the stream.

- stop: the stop route appends a `stop` event and raises the run's stop flag; the holder's stop
  watcher (independent of any client) sets the run's cancel flag, which the answer stages check
  before asking the model and between tokens (a stop is no edge of the graph). From that moment no
  further answer text is appended; a graph that has not ended STOP_GRACE_S later is cancelled hard. Either way the assistant message is saved with
  exactly the text the client was shown, marked stopped, and `complete` (data.stopped) goes last.
- the graph: the pipeline, or agent mode's graph for a turn naming an agent-mode assistant; the
  run record names it (RunRecord.graph), so a takeover resumes the graph that wrote the checkpoint.
- durable runs (Redis): the holder renews a lease; a replica that finds a running run without a
  lease takes it over (takeover_input, below), resumes the graph from its last checkpoint and keeps appending to the
  same stream through a ResumeFilter, so the client never sees text twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from functools import partial
from typing import Any

from langgraph.types import Command

from ragline import defaults
from ragline.checkpoints.streams import Event, FenceLost, StreamManager
from ragline.citations.messages import message_text
from ragline.contracts import events
from ragline.contracts.context import RunContext, RunHost, turn_ids
from ragline.contracts.events import as_json
from ragline.contracts.request import AgentConfig, PipelineRequest
from ragline.contracts.state import TurnFailed
from ragline.generation.input_check import validate_input
from ragline.graph.turn import TurnDriver
from ragline.logs import bind_log_ids
from ragline.mcp_client.oauth import McpUser
from ragline.redis_clients import out_of_memory
from ragline.service import threads
from ragline.service.access import ConflictError, InvalidRequestError, Principal
from ragline.service.after_turn import AfterTurn
from ragline.service.approvals import await_authorizations, await_decisions, waiting_authorizations, waiting_calls
from ragline.service.assistant_service import check_agent_model
from ragline.service.assistants import Assistant
from ragline.service.backend import Backend
from ragline.service.heap import HeapFreezer
from ragline.service.models import check_models
from ragline.service.registry import Decision, RunRecord, RunRegistry
from ragline.service.relay import Run, StageEvents
from ragline.service.replay import Transcript
from ragline.service.resume import ResumeFilter
from ragline.service.sessions import LastRequestState, Session, utcnow
from ragline.service.start_slots import StartSlots
from ragline.service.titles import title_new_session
from ragline.services import Services

log = logging.getLogger(__name__)

class RunManager:
    def __init__(self, backend: Backend, services: Services, *, holder: str | None = None) -> None:
        self.backend = backend
        self.services = services  # the composition root's services, handed to every run
        self.settings = backend.settings
        self.after_turn = AfterTurn(services, self.settings)
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lease_ttl_s = self.settings.run_lease_ttl_s
        self._runs: dict[str, Run] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._loops: list[asyncio.Task[None]] = []
        self._closing = False
        self.heap = HeapFreezer()
        self.start_slots = StartSlots(self.settings.run_start_slots, self.settings.run_start_hold_s)
        # Sessions whose last turn ended here with the graph at its end, so their thread has nothing
        # pending; the next turn needs no settling read, which costs as much as the whole conversation.
        # Only without a durable registry: with one, other replicas write the same threads.
        self._at_rest: dict[str, bool] = {}

    # --- lifecycle ---

    async def start(self) -> None:
        self.heap.startup()  # before any run: what is alive now lives as long as the process
        self._loops.append(asyncio.create_task(self._watch_stops(), name="stop-watcher"))
        if self.backend.registry.durable:
            self._loops.append(asyncio.create_task(self._recover_orphans(), name="run-recovery"))

    async def aclose(self) -> None:
        """Shut down: durable runs are left for another replica; in-process runs end stopped."""
        self._closing = True
        for loop in self._loops:
            loop.cancel()
        for run in list(self._runs.values()):
            if run.task is not None:
                run.task.cancel()
            if self.backend.registry.durable:
                with contextlib.suppress(Exception):
                    await self.backend.registry.release(run.record.message_id, self.holder)
        pending = [t for t in [*self._loops, *self._background, *(r.task for r in self._runs.values())] if t is not None]
        await asyncio.gather(*pending, return_exceptions=True)

    def local_runs(self) -> int:
        return len(self._runs)

    # --- starting and stopping ---

    async def submit(self, who: Principal, session: Session, request: PipelineRequest, assistant: Assistant | None = None) -> RunRecord:
        """Start a turn in the background; returns its ids. ConflictError while another turn runs,
        InvalidRequestError when it names a model this tenant may not use. With an `assistant`
        (the request already holds its settings: AssistantService.turn), the run's agent is its
        configuration and the answer records its id and version."""
        check_models(request, self.settings, who.tenant_id)
        agent = assistant if assistant is not None and assistant.mode == "agent" else None
        if agent is not None:
            check_agent_model(request, self.settings)
        ids = turn_ids(RunContext(session_id=session.id))
        tools: dict[str, Any] = agent.agent_tools() if agent is not None else {}
        record = RunRecord(
            **asdict(ids),
            tenant_id=who.tenant_id,
            owner_id=who.user_id,
            groups=tuple(sorted(who.groups)),
            key_knowledge_bases=tuple(sorted(who.knowledge_bases)) if who.knowledge_bases is not None else None,
            request_json=request.model_dump_json(),
            query=request.query,
            title_pending=self.settings.generate_titles and not session.title,
            started_at=time.time(),
            assistant_id=assistant.id if assistant else "",
            assistant_version=assistant.version if assistant else 0,
            agent_json=assistant.config.model_dump_json(exclude_none=True) if assistant else "",
            graph="agent" if agent is not None else "pipeline",
            **tools,
        )
        running = await self.backend.registry.begin(record, self.holder, self.lease_ttl_s)
        if running is not None:
            raise ConflictError(f"a reply is still being generated in this session (message {running.assistant_message_id}); stop it or wait")
        run = self._prepare(record, request)
        first = run.driver.opening(request.query, title_pending=record.title_pending)  # the driver frames the turn
        await self.backend.streams.append(record.session_id, record.message_id, as_json(first))
        await self.backend.sessions.patch(session.id, {"updated_at": utcnow(), "last_request_state": LastRequestState.of(request)})
        self._start(run, resume=False)
        if record.title_pending:
            self._spawn(self._title(record, request))
        return record

    async def stop(self, record: RunRecord) -> None:
        """Append the stop event and raise the flag; the holder cancels the run within 500 ms."""
        await self.backend.streams.append(record.session_id, record.message_id, as_json(events.stop(record.turn)))
        await self.backend.registry.request_stop(record)
        run = self._runs.get(record.message_id)
        if run is not None:
            self._cancel(run)

    async def inject(self, record: RunRecord, text: str) -> None:
        """Leave a message for a running agent-mode turn: its next step reads it (user_message_injected)."""
        if record.graph != "agent":
            raise ConflictError("only an agent-mode answer takes messages while it runs; wait for this one, or stop it")
        refusal = validate_input(text)
        if refusal is not None:
            raise InvalidRequestError(refusal.message)
        await self.backend.registry.inject(record.message_id, text)

    def _launch(self, record: RunRecord, request: PipelineRequest, *, resume: bool) -> None:
        self._start(self._prepare(record, request), resume=resume)

    def _prepare(self, record: RunRecord, request: PipelineRequest) -> Run:
        """The run of `record`, its driver and its event sink, not started yet."""
        context = RunContext(
            **asdict(record.turn),
            tenant_id=record.tenant_id,
            user_id=record.owner_id,
            groups=tuple(record.groups),
            key_knowledge_bases=tuple(record.key_knowledge_bases) if record.key_knowledge_bases is not None else None,
            agent=AgentConfig.model_validate_json(record.agent_json) if record.agent_json else None,
            assistant_id=record.assistant_id,
            assistant_version=record.assistant_version,
            agent_tools=tuple(record.agent_tools),
            approval_tools=tuple(record.approval_tools),
            agent_mcp_servers=tuple(record.agent_mcp_servers),
            host=RunHost(services=self.services, cancel_event=threading.Event(),
                         inbox=partial(self.backend.registry.take_injected, record.message_id) if record.graph == "agent" else None),
        )
        driver = TurnDriver(self.backend.graph_for(record.graph), context, config=threads.thread_config(record.session_id),
                            durability=self.backend.durability)
        run = Run(record, driver, request, fence=self.backend.registry.fence(record.message_id, self.holder, self.lease_ttl_s))
        run.stage_events = StageEvents(self.backend.streams, run)  # a stage's events go straight into the log
        run.context.host.event_sink = run.stage_events
        return run

    def _start(self, run: Run, *, resume: bool) -> None:
        self._runs[run.record.message_id] = run
        run.task = asyncio.create_task(self._drive(run, resume=resume), name=f"run:{run.record.message_id}")

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _cancel(self, run: Run) -> None:
        if run.cancelled:
            return
        run.context.cancel()
        asyncio.get_running_loop().call_later(defaults.STOP_GRACE_S, self._cancel_hard, run)

    def _cancel_hard(self, run: Run) -> None:
        if run.task is not None and not run.task.done() and not run.finishing:
            run.hard_cancelled = True
            run.task.cancel()

    # --- the run ---

    async def _drive(self, run: Run, *, resume: bool) -> None:
        record = run.record
        bind_log_ids(session_id=record.session_id, message_id=record.message_id)  # this task's records carry them
        heartbeat = asyncio.create_task(self._heartbeat(run)) if self.backend.registry.durable else None
        store_full = False
        try:
            run.start_slot = await self.start_slots.take()  # a burst of turns starts a few at a time
            graph_input: Any = {"request": run.request}
            if resume:
                graph_input = await takeover_input(run, self.backend.streams, self.backend.registry)
            elif not self._at_rest.pop(record.session_id, False):  # no run holds the thread (the registry said so)
                await threads.settle(run.driver.graph, record.session_id)  # clear what a dead one left pending
            while graph_input is not NOTHING_TO_RUN and not run.cancelled:
                async with asyncio.timeout(defaults.RUN_MAX_S):
                    async for event in run.driver.event_dicts(graph_input):  # agent_query went out at submit
                        await self._write(run, event)
                    if run.stage_events is not None:
                        await run.stage_events.delivered()
                # paused for the user's approval (agent mode): resumed with the decisions, or left stopped
                graph_input = await self._approvals(run) if run.driver.interrupts and run.driver.failure is None else NOTHING_TO_RUN
                if isinstance(run.driver.failure, TurnFailed):  # a refused request, a failed search: its event said it
                    log.info("run %s ended: %s", record.message_id, run.driver.failure)
                elif run.driver.failure is not None:
                    log.error("run %s failed", record.message_id, exc_info=run.driver.failure)
                run.ended = run.driver.failure is None and not run.cancelled
        except asyncio.CancelledError:
            if run.lease_lost or (self._closing and self.backend.registry.durable):
                self._runs.pop(record.message_id, None)
                raise  # another replica holds (or will take over) the run
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
            run.context.cancel()  # cancelled hard: a stop, or the shutdown of an in-process run
        except FenceLost:  # a stage's event was refused (StageEvents.delivered): another replica holds the run
            self._runs.pop(record.message_id, None)
            raise asyncio.CancelledError from None
        except Exception as exc:  # the driver turns graph failures into an error event; this is the rest
            if out_of_memory(exc):
                # Nothing of this run can be stored: its readers here got the error and the end from the
                # stream manager. Its record stays running; when Redis has room again its lease has
                # lapsed and the run is taken over from its last checkpoint, so the answer is not lost.
                log.warning("run %s stopped: Redis is full (maxmemory), its events cannot be stored", record.message_id)
                store_full = True
            else:
                log.exception("run %s failed", record.message_id)
                if not run.transcript.failed:
                    await self._write(run, as_json(events.error(record.turn, f"the pipeline failed: {exc}", code="internal")))
        finally:
            if heartbeat is not None:
                heartbeat.cancel()
            if run.start_slot is not None:
                run.start_slot.free()  # a run that ended, failed or stopped before its answer streamed
        if store_full:
            self._runs.pop(record.message_id, None)
            return
        run.finishing = True
        try:
            await self._finish(run)
        finally:
            self._runs.pop(record.message_id, None)
        if not self._runs and not self._closing:  # idle: a full collection keeps no frame waiting
            self.heap.idle()

    async def _approvals(self, run: Run) -> Any:
        """The graph's resume once the user decided every tool call it waits on, or settled every
        MCP server's authorization (service/approvals.py); NOTHING_TO_RUN when the run is stopped meanwhile."""
        if run.start_slot is not None:
            run.start_slot.free()  # a waiting run holds no start slot
        timeout_s, poll_s, record = self.settings.agent_approval_timeout_s, self.settings.stop_poll_s, run.record
        servers = waiting_authorizations(run.driver.interrupts)
        decided = (await await_authorizations(self.services.mcp.oauth, McpUser(record.tenant_id, record.owner_id), servers,
                                              timeout_s=timeout_s, poll_s=poll_s, stopped=lambda: run.cancelled) if servers
                   else await await_decisions(self.backend.registry, record.message_id, waiting_calls(run.driver.interrupts),
                                              timeout_s=timeout_s, poll_s=poll_s, stopped=lambda: run.cancelled))
        if decided is None:
            return NOTHING_TO_RUN
        run.driver.follow_latest()  # resume where the pause left the thread, not at a taken-over checkpoint
        return Command(resume=decided)

    async def decide(self, record: RunRecord, call_id: str, decision: Decision) -> None:
        """The user's decision on a tool call the run waits on; ConflictError when none such waits."""
        if not await self.backend.registry.decide(record.message_id, call_id, decision):
            raise ConflictError(f"no tool call {call_id} waits for approval in this answer (unknown, or decided already)")

    async def _write(self, run: Run, event: Event, *, final: bool = False) -> None:
        admitted = event if final else run.admit(event)
        if admitted is None:
            return
        try:
            await self.backend.streams.append(run.record.session_id, run.record.message_id, admitted, run.fence)
        except FenceLost:
            log.warning("run %s was taken over by another replica: its event was not written", run.record.message_id)
            run.lose_lease()
            raise asyncio.CancelledError from None  # as the heartbeat's cancel would: nothing more of this copy runs
        run.transcript.add(admitted)

    async def _finish(self, run: Run) -> None:
        record = run.record
        if await self.backend.sessions.get(record.session_id) is None:  # deleted while running
            with contextlib.suppress(Exception):
                await self.backend.checkpointer.adelete_thread(record.session_id)
        elif not run.already_complete:
            values: dict[str, Any] | None = None  # what the turn left in the thread, for both steps below
            try:
                if not run.cancelled:
                    values = await self._turn_values(run)
                await settle_answer(run, values, self.backend.graph, lambda event: self._write(run, event, final=True))
            except Exception:
                log.exception("could not save the answer of run %s", record.message_id)
            if values is not None:
                self._after_turn(run, values)
            if run.ended and not self.backend.registry.durable:
                self._left_at_rest(record.session_id)
        if not run.already_complete:
            for event in run.driver.closing():  # cards left open, then complete
                await self._write(run, as_json(event), final=True)
        await self.backend.registry.finish(record)
        await self.backend.sessions.patch(record.session_id, {"updated_at": utcnow()})

    def _left_at_rest(self, session_id: str) -> None:
        self._at_rest[session_id] = True
        if len(self._at_rest) > defaults.AT_REST_SESSIONS_MAX:
            del self._at_rest[next(iter(self._at_rest))]  # the longest remembered: it will be settled, as before

    async def _turn_values(self, run: Run) -> dict[str, Any]:
        """The thread after the turn, as far as its end needs it: what the turn's stages wrote. A run
        taken over from another replica reads the thread back, since stages that ran there wrote part of it."""
        if run.resume_filter is None:
            return run.driver.written.values()
        return (await threads.snapshot(run.driver.graph, run.record.session_id)).values

    def _after_turn(self, run: Run, values: dict[str, Any]) -> None:
        """Citations into the caller's ledger, the turn into their chat history when asked
        (service/after_turn.py); in the background: the client's `complete` never waits on them."""
        try:
            jobs = self.after_turn.jobs(values, run.record, run.request, run.transcript)
        except Exception:
            log.warning("reading the answered turn of run %s failed", run.record.message_id, exc_info=True)
            return
        for job in jobs:
            self._spawn(job)

    # --- durability: resume, heartbeat, takeover ---

    async def _heartbeat(self, run: Run) -> None:
        period = min(defaults.RUN_HEARTBEAT_S, self.lease_ttl_s / 3)
        while True:
            await asyncio.sleep(period)
            try:
                held = await self.backend.registry.renew(run.record.message_id, self.holder, self.lease_ttl_s)
            except Exception:
                log.warning("lease renewal of run %s failed", run.record.message_id, exc_info=True)
                continue
            if not held:
                log.warning("run %s was taken over by another replica", run.record.message_id)
                run.lose_lease()
                return

    async def _recover_orphans(self) -> None:
        period = min(defaults.RUN_RECOVERY_POLL_S, self.lease_ttl_s / 3)
        while True:
            try:
                for record in await self.backend.registry.orphans():
                    if record.message_id in self._runs:
                        continue
                    if await self.backend.registry.acquire(record.message_id, self.holder, self.lease_ttl_s):
                        log.info("taking over run %s of session %s", record.message_id, record.session_id)
                        request = PipelineRequest.model_validate_json(record.request_json)  # the stored turn, read back once
                        self._launch(record, request, resume=True)
                        session = await self.backend.sessions.get(record.session_id)
                        if record.title_pending and session is not None and not session.title:
                            self._spawn(self._title(record, request))
            except Exception:
                log.warning("looking for orphaned runs failed", exc_info=True)
            await asyncio.sleep(period)

    async def _watch_stops(self) -> None:
        """The stop watcher: one query per period for all runs this process holds."""
        while True:
            await asyncio.sleep(self.settings.stop_poll_s)
            if not self._runs:
                continue
            try:
                flagged = await self.backend.registry.stop_requested(list(self._runs))
            except Exception:
                log.warning("reading stop flags failed", exc_info=True)
                continue
            for message_id in flagged:
                run = self._runs.get(message_id)
                if run is not None:
                    self._cancel(run)

    # --- titles ---

    async def _title(self, record: RunRecord, request: PipelineRequest) -> None:
        title = await title_new_session(self.backend.sessions, record.session_id, record.query, self.services.chat(request.chat_model))
        if title is not None:
            await self.backend.streams.append(record.session_id, record.message_id, as_json(events.session_title(record.turn, title)))


# --- taking a run over: what a replica feeds a run it takes over from a dead one ---
# The run's stream log and its thread's checkpoint say how far it got: an answer already complete
# or stopped needs nothing; a thread whose turn is this run's goes on from exactly the checkpoint
# found; a thread that never reached the turn restarts it from the stored request.

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


# --- the end of a run: the saved assistant message and what its client was shown must agree ---
# A stopped run saves the partial answer the client saw. Otherwise the thread's answer is the
# truth: a stream that missed its tail (a crash right after the node) gets the rest, and one that
# showed other text (an agent's superseded rounds, a generation redone on takeover) gets a
# `replace` carrying the whole saved answer.

Write = Callable[[Event], Awaitable[None]]  # appends an event to the run's log, as the run's last words


async def settle_answer(run: Run, values: dict[str, Any] | None, graph: Any, write: Write) -> None:
    """`values`: the thread after the turn; `graph`: the pipeline, through which edits of the thread go, whichever graph ran."""
    record = run.record
    shown = run.transcript
    if run.cancelled:
        await threads.save_answer(
            graph,
            record.turn,
            query=record.query,
            content=shown.answer,
            references=shown.references,
            stopped=True,
            metadata=run.context.answer_metadata(),
        )
        return
    saved = next((m for m in (values or {}).get("messages", []) if m.id == record.assistant_message_id), None)
    if saved is None:
        return  # the turn failed; the error event told the client
    text = message_text(saved)
    if text == shown.answer:
        return
    turn = record.turn
    if text.startswith(shown.answer):  # the stream missed the tail (a crash right after the node)
        await write(as_json(events.answer(turn, text[len(shown.answer) :])))
    else:
        replace = events.answer(turn, text)
        replace.data = {"replace": True}
        await write(as_json(replace))
