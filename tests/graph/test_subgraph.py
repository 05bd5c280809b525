"""Ragline's compiled graph as a node of another LangGraph graph."""

import operator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from ragline.checkpoints.savers import memory_saver
from ragline.contracts.context import RunContext, RunHost
from ragline.contracts.request import PipelineRequest
from ragline.contracts.state import TurnFailed
from ragline.graph.graphs import build_graph
from ragline.services import Services
from tests.scripted_model import Reply


class ParentState(TypedDict, total=False):
    question: str
    request: PipelineRequest
    chat_response: Any
    log: Annotated[list[str], operator.add]  # a list with an add reducer, as agent graphs have
    messages: Annotated[list[Any], operator.add]


def _prepare(state: ParentState) -> dict:
    return {"request": PipelineRequest(query=state["question"]), "log": ["prepared"]}


def _read(state: ParentState) -> dict:
    return {"log": [f"answer: {state['chat_response'].content}"]}


def _parent(services: Services | None = None, context_schema: type | None = None):
    """A parent graph embedding ours; `services` bound at compile time, else taken from the run context."""
    graph = StateGraph(ParentState, context_schema=context_schema)
    graph.add_node("prepare", _prepare)
    graph.add_node("ragline", build_graph("ragline", services=services))
    graph.add_node("read", _read)
    graph.add_edge(START, "prepare")
    graph.add_edge("prepare", "ragline")
    graph.add_edge("ragline", "read")
    graph.add_edge("read", END)
    return graph.compile(checkpointer=memory_saver())


async def test_parent_graph_calls_ragline_and_reads_the_answer(scripted_model):
    scripted_model.on(lambda b: True, Reply.text("Berlin."))
    result = await _parent(Services()).ainvoke({"question": "Capital of Germany?", "messages": ["parent message"]}, {"configurable": {"thread_id": "p1"}})
    assert result["log"] == ["prepared", "answer: Berlin."]
    assert result["messages"] == ["parent message"]  # our conversation never leaks into the parent's list


async def test_a_parent_hands_the_services_to_the_embedded_graph_through_its_run_context(scripted_model):
    scripted_model.on(lambda b: True, Reply.text("Berlin."))
    parent = _parent(context_schema=RunContext)
    result = await parent.ainvoke({"question": "Capital of Germany?"}, {"configurable": {"thread_id": "p3"}},
                                  context=RunContext(host=RunHost(services=Services())))
    assert result["log"] == ["prepared", "answer: Berlin."]


async def test_events_from_the_embedded_graph_reach_the_parent_stream(scripted_model):
    scripted_model.on(lambda b: True, Reply.text("Berlin."))
    chunks = [c async for c in _parent(Services()).astream({"question": "q"}, {"configurable": {"thread_id": "p2"}}, stream_mode="custom", subgraphs=True)]
    answers = [payload["content"] for _, payload in chunks if payload.get("response_type") == "answer"]
    assert "".join(answers) == "Berlin."


def test_input_and_output_schemas_are_explicit():
    graph = build_graph("ragline")
    assert set(graph.get_input_jsonschema()["properties"]) == {"request"}
    assert "messages" not in graph.get_output_jsonschema()["properties"]


async def test_a_turn_without_a_session_id_belongs_to_its_thread(scripted_model):
    scripted_model.on(lambda b: True, Reply.text("Berlin."))
    graph = build_graph("ragline_chat", checkpointer=memory_saver(), services=Services())
    config = {"configurable": {"thread_id": "thread-7"}}
    await graph.ainvoke({"messages": [("user", "Capital of Germany?")]}, config)
    assert (await graph.aget_state(config)).values["turn"].session_id == "thread-7"


async def test_the_request_form_without_a_request_is_refused_in_words(scripted_model):
    chunks = []
    with pytest.raises(TurnFailed):
        async for chunk in build_graph("ragline", services=Services()).astream({"messages": [("user", "hi")]}, stream_mode="custom"):
            chunks.append(chunk)
    errors = [c for c in chunks if c["response_type"] == "error"]
    assert errors and "ragline_chat" in errors[0]["content"] and errors[0]["data"]["code"] == "invalid_input"


async def test_a_run_with_no_turn_driver_is_framed_by_the_graph_itself(scripted_model):
    """Studio, a parent graph, an agent's tool: agent_query first and complete last, as the driver sends them."""
    scripted_model.on(lambda b: True, Reply.text("Berlin."))
    chunks = [c async for c in _parent(Services()).astream({"question": "q"}, {"configurable": {"thread_id": "p9"}}, stream_mode="custom", subgraphs=True)]
    kinds = [payload["response_type"] for _, payload in chunks]
    assert kinds[0] == "agent_query" and kinds[-1] == "complete" and kinds.count("complete") == 1 and kinds.count("agent_query") == 1
    assert chunks[0][1]["content"] == "q" and chunks[-1][1]["assistant_message_id"] == chunks[0][1]["assistant_message_id"]


@pytest.mark.parametrize("outcome", ["answer", "refused"])
async def test_a_graph_frames_its_own_turn_once_whatever_ids_its_context_carries(scripted_model, outcome):
    """Who frames a turn is declared (RunHost.framing), not guessed from the ids: a parent graph that
    passes its own ids still gets one agent_query and one complete, after an answer or a refusal;
    a turn driver around the same graph sends them itself, and the graph sends none."""
    from ragline.contracts.context import Framing
    from ragline.graph.turn import stream_turn

    scripted_model.on(lambda b: True, Reply.text("Berlin."))
    request = {"query": "What is the capital of Germany?" if outcome == "answer" else ""}
    context = RunContext(session_id="p-ids", request_id="r-parent", assistant_message_id="a-parent", host=RunHost(services=Services()))
    graph = build_graph("chat_stream", checkpointer=memory_saver())
    chunks: list[dict[str, Any]] = []
    try:
        async for chunk in graph.astream({"request": request}, {"configurable": {"thread_id": "p-ids"}}, context=context, stream_mode="custom"):
            chunks.append(chunk)
    except TurnFailed:
        assert outcome == "refused"
    kinds = [c["response_type"] for c in chunks]
    assert kinds.count("agent_query") == 1 and kinds.count("complete") == 1 and kinds[0] == "agent_query" and kinds[-1] == "complete"
    assert context.host.framing is Framing.GRAPH

    driven = RunContext(session_id="p-driven", host=RunHost(services=Services()))
    frames = [e.response_type.value async for e in stream_turn(build_graph("chat_stream", checkpointer=memory_saver()),
                                                              PipelineRequest.model_construct(**request), driven)]
    assert frames.count("agent_query") == 1 and frames.count("complete") == 1 and frames[0] == "agent_query" and frames[-1] == "complete"
    assert driven.host.framing is Framing.HOST
