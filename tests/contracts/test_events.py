from langgraph.runtime import Runtime

from ragline.contracts import events
from ragline.contracts.context import ExclusiveSink, RunContext, RunHost
from ragline.contracts.events import ProgressWindow, ResponseType
from ragline.contracts.state import TurnIds

TURN = TurnIds("s", "r", "u", "a")

SEED_RESPONSE_TYPES = {
    "agent_query", "thinking", "answer", "references", "tool_call", "tool_result", "command_output",
    "install_output", "reflection", "session_title", "error", "complete", "tool_approval_required",
    "tool_approval_resolved", "mcp_oauth_required", "mcp_oauth_resolved", "memory_recalled",
    "artifacts_pending", "user_message_injected", "context_compacted", "install_prompt", "stop",
}


def test_every_seed_response_type_exists():
    assert {t.value for t in ResponseType} == SEED_RESPONSE_TYPES


def test_events_carry_request_session_and_assistant_message_ids():
    event = events.answer(TURN, "hi")
    assert (event.id, event.session_id, event.assistant_message_id) == ("r", "s", "a")


def test_truncated_answer_is_flagged_in_data():
    assert events.answer(TURN, "", done=True, truncated=True).data == {"truncated": True}
    assert events.answer(TURN, "x").data is None


def test_progress_window_pairs_share_a_tool_call_id():
    call = events.tool_call(TURN, ProgressWindow.KNOWLEDGE_SEARCH)
    result = events.tool_result(TURN, ProgressWindow.KNOWLEDGE_SEARCH, success=False, error="boom")
    assert call.data["tool_call_id"] == result.data["tool_call_id"]
    assert result.data["success"] is False and result.data["error"] == "boom"


def test_emit_outside_a_run_reaches_the_host_sink():
    received = []
    events.emit(RunContext(host=RunHost(event_sink=received.append)), events.complete(TURN))
    assert [e.response_type for e in received] == [ResponseType.COMPLETE]


def test_stream_response_serialises_to_the_seed_json_shape():
    payload = events.references(TURN, [{"id": "c1"}]).model_dump(mode="json", exclude_none=True)
    assert payload["response_type"] == "references" and payload["knowledge_references"] == [{"id": "c1"}]


class _Collecting(ExclusiveSink):
    def __init__(self) -> None:
        self.events: list[object] = []

    def __call__(self, event: object) -> None:
        self.events.append(event)


async def _streamed(sink: object) -> list[dict]:
    """What LangGraph's custom stream carries when a node emits one event with `sink` as the host's sink."""
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    class State(TypedDict, total=False):
        done: bool

    def node(state: State, runtime: Runtime[RunContext]) -> State:
        events.emit(runtime.context, events.answer(TURN, "hi"))
        return {"done": True}

    graph = StateGraph(State, context_schema=RunContext)
    graph.add_node("node", node)
    graph.add_edge(START, "node")
    graph.add_edge("node", END)
    context = RunContext(host=RunHost(event_sink=sink))
    return [chunk async for chunk in graph.compile().astream({}, context=context, stream_mode="custom")]


async def test_an_exclusive_sink_takes_the_events_and_langgraphs_stream_carries_none():
    sink = _Collecting()
    assert await _streamed(sink) == []
    assert [e.content for e in sink.events] == ["hi"]  # type: ignore[attr-defined]


async def test_a_plain_sink_gets_the_events_beside_langgraphs_stream():
    received: list[object] = []
    assert [chunk["content"] for chunk in await _streamed(received.append)] == ["hi"]
    assert [e.content for e in received] == ["hi"]  # type: ignore[attr-defined]
