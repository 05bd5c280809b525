"""One user turn, driven the same way by every host (CLI, HTTP service, tests).

The host's frame around the graph's own events: `agent_query` first (with the ids a client needs
to resume), then whatever the stages emit, then `complete` last, also after an error or a stop.
A progress card the graph left open (a stage raised) is closed as failed before `complete`.
The turn's ids are minted here, once; `begin_turn` only mints them for hosts that drive the
graph themselves (Studio, a parent graph).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from langchain_core.messages import AnyMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from ragline.contracts import events
from ragline.contracts.context import Framing, RunContext, turn_ids, with_turn_ids
from ragline.contracts.events import ProgressWindow, ResponseType, StreamResponse
from ragline.contracts.passages import knowledge_ids
from ragline.contracts.request import PipelineRequest
from ragline.contracts.state import ChatResponse
from ragline.graph import tracing
from ragline.graph.graphs import Graph

log = logging.getLogger(__name__)
Durability = Literal["sync", "async", "exit"]


@dataclass
class TurnWrites:
    """What the turn's stages wrote that its host needs once the turn ends: the messages (the
    answer among them, by id) and the last `chat_response`.

    Gathered from LangGraph's "updates" stream as the stages finish. Reading the thread back after
    the turn would cost as much as the whole conversation: every message deserialized, every turn.
    """

    messages: dict[str, AnyMessage] = field(default_factory=dict)
    chat_response: ChatResponse | None = None
    drawn_on: set[str] = field(default_factory=set)  # the documents whose passages reached the model (merged results, agent sources)

    def see(self, chunk: dict[str, Any]) -> None:
        """One "updates" chunk: {node: its update, or a list of them, or None}."""
        for update in chunk.values():
            for written in update if isinstance(update, list) else [update]:
                if isinstance(written, dict):
                    self._take(written)

    def _take(self, update: dict[str, Any]) -> None:
        if "chat_response" in update:
            self.chat_response = update["chat_response"]
        for written in (update.get("merge_results"), update.get("sources")):
            passages = getattr(written, "value", written)  # a reducer's Overwrite (the agent resets its sources) carries its list
            if isinstance(passages, list):
                self.drawn_on |= knowledge_ids(passages)
        messages = update.get("messages") or []
        for message in messages if isinstance(messages, list) else [messages]:
            if isinstance(message, RemoveMessage):
                self.messages.pop(message.id or "", None)
            elif getattr(message, "id", None):
                self.messages[message.id] = message  # add_messages: a later write with the same id replaces it

    def values(self) -> dict[str, Any]:
        """The written keys in the shape of the thread's state values."""
        return {"messages": list(self.messages.values()), "chat_response": self.chat_response, "drawn_on": sorted(self.drawn_on)}


class TurnDriver:
    """Runs one turn of a compiled graph on the session's thread and frames its events."""

    def __init__(self, graph: Graph, context: RunContext, *, config: RunnableConfig | None = None,
                 durability: Durability | None = None) -> None:
        self.graph = graph
        self.context = with_turn_ids(context)
        self.context.host.framing = Framing.HOST  # the host's own handles (shared, as the cancel flag is): this driver frames the turn
        self.turn = turn_ids(self.context)
        configurable = {"thread_id": self.context.session_id, **((config or {}).get("configurable") or {})}
        # with tracing on, one span per stage (graph/tracing.py); off, the config is unchanged
        self.config: RunnableConfig = tracing.traced({**(config or {}), "configurable": configurable}, self.context)
        self.durability = durability
        self.failed = False
        self.failure: Exception | None = None  # what broke the graph, for the host's logs
        self.written = TurnWrites()
        self.interrupts: list[Any] = []  # what the graph paused on (agent mode's approval), until it is resumed
        self._open_windows: dict[str, None] = {}

    def opening(self, query: str, *, title_pending: bool = False) -> StreamResponse:
        return events.agent_query(self.turn, query, title_pending=title_pending)

    def seen(self, event: StreamResponse) -> StreamResponse:
        """Track what the client was shown: failures, and the progress cards still open."""
        self.see(event.response_type, event.data)
        return event

    def see(self, kind: str, data: dict[str, Any] | None) -> None:
        """`seen` for an event given as its parts (a stage's JSON-ready event, however it reached the host)."""
        tool = (data or {}).get("tool_name")
        if kind == ResponseType.ERROR:
            self.failed = True
        elif kind == ResponseType.TOOL_CALL and tool:
            self._open_windows[tool] = None
        elif kind == ResponseType.TOOL_RESULT and tool:
            self._open_windows.pop(tool, None)

    async def events(self, graph_input: Any) -> AsyncIterator[StreamResponse]:
        """The graph's events; an unexpected failure becomes one error event (cancellation propagates)."""
        async for event in self.event_dicts(graph_input):
            yield StreamResponse.model_validate(event)

    def follow_latest(self) -> None:
        """Run on from the thread's latest checkpoint: a host that took a run over pinned the one it
        found, and resuming that one again would replay the pause it ended in."""
        configurable = {key: value for key, value in self.config.get("configurable", {}).items() if key != "checkpoint_id"}
        self.config = {**self.config, "configurable": configurable}

    async def event_dicts(self, graph_input: Any) -> AsyncIterator[dict[str, Any]]:
        """`events` as the JSON-ready dicts the stages emitted, for a host that stores or sends them
        as they are (the HTTP service): an answer token is then never parsed back into a model."""
        self.interrupts = []
        try:
            # subgraphs: the progress cards are subgraphs (graph/cards.py), and their stages emit too
            stream = self.graph.astream(graph_input, self.config, context=self.context, stream_mode=["custom", "updates"],
                                        durability=self.durability, subgraphs=True)
            async for namespace, mode, chunk in cast(AsyncIterator[tuple[tuple[str, ...], str, Any]], stream):
                if mode == "updates":
                    if not namespace:  # the turn's own writes; a card's stages write inside it
                        self.written.see(chunk)
                        self.interrupts += [item.value for item in chunk.get("__interrupt__", ())]
                    continue
                self.see(chunk.get("response_type", ""), chunk.get("data"))
                yield chunk
        except Exception as exc:
            self.failure = exc  # the host decides how loudly to log it; a CLI must not print a traceback
            log.debug("turn %s failed", self.turn.assistant_message_id, exc_info=True)
            for event in self._close_windows(str(exc) or type(exc).__name__):
                yield events.as_json(event)
            if not self.failed:
                yield events.as_json(self.seen(events.error(self.turn, f"the pipeline failed: {exc}", code="internal")))

    def _close_windows(self, error: str) -> list[StreamResponse]:
        """Progress cards the graph left open (a stage raised, or the run was cancelled hard), as failed."""
        closing = [
            events.tool_result(self.turn, ProgressWindow(tool), success=False, error=error)
            for tool in self._open_windows
            if tool in ProgressWindow._value2member_map_
        ]
        self._open_windows.clear()
        return closing

    def closing(self) -> list[StreamResponse]:
        """Cards still open closed as failed, then complete."""
        return [*self._close_windows("the stage did not finish"), events.complete(self.turn, stopped=self.context.is_cancelled())]

    async def run(self, request: PipelineRequest, decide: Decide | None = None) -> AsyncIterator[StreamResponse]:
        """The turn's events. When the graph pauses (agent mode's tool approval), `decide` is asked
        for the resume value and the turn goes on; without one, the turn ends paused."""
        yield self.opening(request.query)
        graph_input: Any = {"request": request}
        while True:
            async for event in self.events(graph_input):
                yield event
            if not self.interrupts or decide is None or self.failed or self.context.is_cancelled():
                break
            graph_input = Command(resume=await decide(self.interrupts))
        for event in self.closing():
            yield event


# what a host answers when the graph pauses: the interrupts' values in, the resume value out
Decide = Callable[[list[Any]], Awaitable[Any]]


async def stream_turn(graph: Graph, request: PipelineRequest, context: RunContext | None = None,
                      config: RunnableConfig | None = None, decide: Decide | None = None) -> AsyncIterator[StreamResponse]:
    """Events of one turn on the session's thread (config's thread_id defaults to the session id);
    `decide` answers the graph's pauses (TurnDriver.run)."""
    async for event in TurnDriver(graph, context or RunContext(), config=config).run(request, decide):
        yield event
