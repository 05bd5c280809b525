"""Run a preset graph for one turn and collect its events (shared by the node tests)."""

from __future__ import annotations

from langgraph.runtime import Runtime

from ragline.checkpoints.savers import memory_saver
from ragline.contracts.context import EventSink, RunContext, RunHost
from ragline.contracts.events import ResponseType, StreamResponse
from ragline.contracts.request import PipelineRequest
from ragline.graph.graphs import build_graph
from ragline.graph.turn import stream_turn
from ragline.services import Services


async def run_turn(preset: str, request: PipelineRequest, graph=None, session_id: str = "s1") -> list[StreamResponse]:
    graph = graph or build_graph(preset, checkpointer=memory_saver())
    context = RunContext(session_id=session_id, host=RunHost(services=Services()))  # built now: the test's settings apply
    return [event async for event in stream_turn(graph, request, context)]


def of_type(events: list[StreamResponse], kind: ResponseType) -> list[StreamResponse]:
    return [e for e in events if e.response_type == kind]


def answer_text(events: list[StreamResponse]) -> str:
    return "".join(e.content for e in of_type(events, ResponseType.ANSWER))


def node_runtime(services: Services | None = None, event_sink: EventSink | None = None, **context: object) -> Runtime[RunContext]:
    """A runtime for calling a node directly, with services built from the test's settings."""
    host = RunHost(services=services or Services(), event_sink=event_sink)
    return Runtime(context=RunContext(**context, host=host))  # type: ignore[arg-type]
