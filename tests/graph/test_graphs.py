import json
import threading

import pytest

from ragline.checkpoints.savers import memory_saver
from ragline.contracts.context import RunContext, RunHost
from ragline.contracts.events import ResponseType
from ragline.contracts.passages import SearchResult
from ragline.contracts.request import PipelineRequest
from ragline.contracts.state import ErrorKind, TurnFailed
from ragline.graph import cards
from ragline.graph.graphs import PRESETS, build_graph
from ragline.graph.turn import stream_turn
from ragline.services import Services
from tests.scripted_model import Reply


def test_every_preset_compiles():
    for name in PRESETS:
        assert build_graph(name).name == name


# --- runtime routing, with searches supplied by the test (the rest of the search card is real) ---


def _result(chunk_id: str, content: str) -> SearchResult:
    return SearchResult(id=chunk_id, content=content, score=0.9, knowledge_id=f"doc-{chunk_id}", knowledge_base_id="kb")


@pytest.fixture
def searches(monkeypatch):
    """Set `outcome` before building the graph: cancel, raise, nothing, or the results of each branch."""
    outcome: dict = {}

    async def chunk_search_parallel(state, runtime):
        if outcome.get("cancel"):
            runtime.context.host.cancel_event.set()
        if outcome.get("raise"):
            raise RuntimeError("search store unreachable")
        return {"search_targets": []}

    async def chunk_search(state, runtime):
        return {"search_results": [] if outcome.get("nothing") else outcome.get("chunks", [_result("c1", "Paris is the capital of France.")])}

    async def entity_search(state, runtime):
        return {"search_results": [] if outcome.get("nothing") else outcome.get("entities", [])}

    monkeypatch.setattr(cards, "chunk_search_parallel", chunk_search_parallel)
    monkeypatch.setattr(cards, "chunk_search", chunk_search)
    monkeypatch.setattr(cards, "entity_search", entity_search)
    return outcome


def _graph():
    return build_graph("ragline", checkpointer=memory_saver())


async def _run(graph, request, context=None):
    context = context or RunContext(host=RunHost(cancel_event=threading.Event(), services=Services()))
    return [e async for e in stream_turn(graph, request, context)]


def _types(events):
    return [e.response_type.value for e in events]


def _json_reply(intent):
    return Reply.text(json.dumps({"rewrite_query": "capital of France", "intent": intent}))


def _is_rewrite(body):
    return "rewrite_query" in body["messages"][0]["content"]


async def test_search_nothing_routes_to_the_fallback_answer(scripted_model, searches):
    scripted_model.on(_is_rewrite, _json_reply("kb_search"))
    request = PipelineRequest(query="capital?", knowledge_base_ids=["kb"], fallback_response="Nothing found.")
    searches.update(nothing=True)
    events = await _run(_graph(), request)
    answers = [e.content for e in events if e.response_type == ResponseType.ANSWER]
    assert answers == ["Nothing found."]
    assert _types(events)[-1] == "complete"


async def test_cancellation_is_checked_before_search_nothing(scripted_model, searches):
    scripted_model.on(_is_rewrite, _json_reply("kb_search"))
    request = PipelineRequest(query="capital?", knowledge_base_ids=["kb"], fallback_response="Nothing found.")
    searches.update(nothing=True, cancel=True)
    events = await _run(_graph(), request)
    assert ResponseType.ANSWER not in [e.response_type for e in events]
    assert events[-1].response_type == ResponseType.COMPLETE and events[-1].data == {"stopped": True}


async def test_retrieval_stages_are_skipped_when_the_intent_needs_no_retrieval(scripted_model, searches):
    scripted_model.on(_is_rewrite, _json_reply("greeting"))
    scripted_model.on(lambda b: True, Reply.text("Hello there!"))
    searches["raise"] = True
    events = await _run(_graph(), PipelineRequest(query="hi", knowledge_base_ids=["kb"]))
    assert "".join(e.content for e in events if e.response_type == ResponseType.ANSWER) == "Hello there!"
    assert "greet" in scripted_model.requests[-1]["messages"][0]["content"].lower()  # intent prompt override
    assert [e.data["tool_name"] for e in events if e.response_type == ResponseType.TOOL_CALL] == ["query_understand"]


async def test_progress_windows_open_and_close_in_pairs(scripted_model, searches):
    scripted_model.on(_is_rewrite, _json_reply("kb_search"))
    events = await _run(_graph(), PipelineRequest(query="capital?", knowledge_base_ids=["kb"]))
    windows = [(e.response_type.value, e.data["tool_name"]) for e in events if e.response_type in (ResponseType.TOOL_CALL, ResponseType.TOOL_RESULT)]
    assert windows == [
        ("tool_call", "query_understand"), ("tool_result", "query_understand"),
        ("tool_call", "knowledge_search"), ("tool_result", "knowledge_search"),
    ]


async def test_progress_window_closes_when_its_stage_fails(scripted_model, searches):
    scripted_model.on(_is_rewrite, _json_reply("kb_search"))
    searches["raise"] = True
    events = await _run(_graph(), PipelineRequest(query="capital?", knowledge_base_ids=["kb"]))
    closing = [e for e in events if e.response_type == ResponseType.TOOL_RESULT and e.data["tool_name"] == "knowledge_search"]
    assert len(closing) == 1 and closing[0].data["success"] is False
    assert _types(events)[-2:] == ["error", "complete"]


async def test_pure_chat_request_runs_the_chat_pipeline_only(scripted_model, searches):
    scripted_model.on(lambda b: True, Reply.text("Plain answer"))
    searches["raise"] = True
    events = await _run(_graph(), PipelineRequest(query="hello"))
    assert not [e for e in events if e.response_type == ResponseType.TOOL_CALL]
    assert len(scripted_model.requests) == 1  # no rewrite call


async def test_plain_json_request_is_validated_when_the_turn_begins(scripted_model):
    scripted_model.on(lambda b: True, Reply.text("ok"))
    graph = build_graph("chat_stream", checkpointer=memory_saver())
    result = await graph.ainvoke({"request": {"query": "hi", "summary": {"max_tokens": 5}}}, {"configurable": {"thread_id": "j"}}, context=RunContext(host=RunHost(services=Services())))
    assert result["chat_response"].content == "ok"


async def test_invalid_request_ends_the_turn_with_a_clear_error(scripted_model):
    received = []
    graph = build_graph("chat_stream", checkpointer=memory_saver())
    with pytest.raises(TurnFailed) as failed:
        await graph.ainvoke({"request": {"query": "hi", "rerank_top_k": 0}}, {"configurable": {"thread_id": "k"}},
                            context=RunContext(host=RunHost(event_sink=received.append, services=Services())))
    assert failed.value.error.kind == ErrorKind.INVALID_INPUT and "rerank_top_k" in failed.value.error.message
    # no turn driver around this run (its context has no ids): the graph frames the turn itself
    assert [e.response_type for e in received] == [ResponseType.AGENT_QUERY, ResponseType.ERROR, ResponseType.COMPLETE]
    assert scripted_model.requests == []


async def test_agent_config_in_the_run_context_sets_request_defaults(scripted_model):
    from ragline.contracts.request import AgentConfig

    graph = build_graph("chat_stream", checkpointer=memory_saver())
    await graph.ainvoke({"request": {"query": "hi"}}, {"configurable": {"thread_id": "a"}}, context=RunContext(agent=AgentConfig(summary={"max_tokens": 11}), host=RunHost(services=Services())))
    assert scripted_model.requests[-1]["max_tokens"] == 11


async def test_parallel_branches_merge_into_one_deduplicated_result_list(scripted_model, searches):
    scripted_model.on(_is_rewrite, _json_reply("kb_search"))
    scripted_model.on(lambda b: True, Reply.text("answer"))
    searches.update(chunks=[_result("c1", "Chunk text about rivers.")],
                    entities=[_result("c1", "Chunk text about rivers."), _result("e1", "Entity text about mountains.")])
    graph = _graph()
    context = RunContext(session_id="parallel", host=RunHost(cancel_event=threading.Event(), services=Services()))
    events = await _run(graph, PipelineRequest(query="rivers and mountains", knowledge_base_ids=["kb"]), context)
    searched = (await graph.aget_state({"configurable": {"thread_id": "parallel"}})).values["search_results"]
    assert sorted(result.id for result in searched) == ["c1", "e1"]
    windows = [(e.response_type.value, e.data["tool_name"]) for e in events if e.data and "tool_name" in e.data]
    assert windows.count(("tool_call", "knowledge_search")) == 1 and windows.count(("tool_result", "knowledge_search")) == 1


async def test_both_branches_empty_is_search_nothing(scripted_model, searches):
    scripted_model.on(_is_rewrite, _json_reply("kb_search"))
    searches.update(nothing=True)
    events = await _run(_graph(), PipelineRequest(query="q", knowledge_base_ids=["kb"], fallback_response="none"))
    assert [e.content for e in events if e.response_type == ResponseType.ANSWER] == ["none"]


async def test_each_turn_starts_from_clean_per_turn_keys_while_messages_persist(scripted_model, searches):
    scripted_model.on(_is_rewrite, _json_reply("greeting"), times=1)
    scripted_model.on(lambda b: True, Reply.text("fine"))
    graph = _graph()
    config = {"configurable": {"thread_id": "clean"}}
    first = await graph.ainvoke({"request": PipelineRequest(query="hello", knowledge_base_ids=["kb"])}, config, context=RunContext(host=RunHost(services=Services())))
    assert first["intent"] == "greeting"
    second = await graph.ainvoke({"request": PipelineRequest(query="q", knowledge_base_ids=["kb"], rewrite_enabled=False)}, config, context=RunContext(host=RunHost(services=Services())))
    state = (await graph.aget_state(config)).values
    assert second["intent"] == "" and state["system_prompt_override"] is None
    assert [m.type for m in state["messages"]] == ["human", "ai", "human", "ai"]


async def test_runtime_handles_never_reach_the_checkpoint(scripted_model):
    graph = build_graph("chat_stream", checkpointer=memory_saver())
    sink_marker = []
    config = {"configurable": {"thread_id": "handles"}}
    await graph.ainvoke({"request": {"query": "hi"}}, config, context=RunContext(host=RunHost(event_sink=sink_marker.append, cancel_event=threading.Event(), services=Services())))
    saved = graph.checkpointer.get_tuple(config).checkpoint
    values = saved["channel_values"].values()
    assert not any(callable(v) or isinstance(v, (threading.Event, RunContext, Services)) for v in values)
    assert "event_sink" not in repr(saved)
    assert sink_marker  # the sink did receive events
