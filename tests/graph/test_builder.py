import json
import threading

from ragline.checkpoints.savers import memory_saver
from ragline.graph.builder import (
    FALLBACK,
    PRESETS,
    PipelineBuilder,
    chat_pipeline,
    compile_pipeline,
    dynamic_pipeline,
    rag_pipeline,
)
from ragline.graph.context import RunContext
from ragline.graph.events import ProgressWindow, ResponseType
from ragline.graph.request import PipelineRequest
from ragline.graph.stages import STAGE_NODES, Stage, StageSpec
from ragline.graph.state import ErrorKind, PipelineError
from ragline.graph.turn import stream_turn
from ragline.services import Services
from tests.scripted_model import Reply

S = Stage


def test_rag_pipeline_has_the_seed_stage_order():
    assert rag_pipeline().stages == [
        S.LOAD_HISTORY, S.MEMORY_RECALL, S.QUERY_UNDERSTAND, S.CHUNK_SEARCH_PARALLEL, S.CHUNK_RERANK,
        S.WEB_FETCH, S.CHUNK_MERGE, S.FILTER_TOP_K, S.DATA_ANALYSIS, S.INTO_CHAT_MESSAGE, S.CHAT_COMPLETION_STREAM,
    ]


def test_chat_pipeline_is_a_subsequence_of_the_rag_pipeline():
    rag = rag_pipeline().stages
    positions = [rag.index(stage) for stage in chat_pipeline().stages]
    assert positions == sorted(positions)


def test_add_if_records_its_condition():
    pipeline = PipelineBuilder().add_if(lambda s: False, S.LOAD_HISTORY).add(S.CHAT_COMPLETION).build()
    assert len(pipeline.steps[0].conditions) == 1 and pipeline.steps[1].conditions == ()


def test_only_stages_that_exist_are_wired():
    graph = compile_pipeline(rag_pipeline(), stages=_core_stages())
    nodes = set(graph.get_graph().nodes)
    assert "rerank" not in nodes and "memory_recall" not in nodes
    assert {"begin_turn", "query_understand", "chat_completion_stream"} <= nodes
    assert "fallback" not in nodes  # nothing in this pipeline searches, so nothing can find nothing


def test_rag_stream_wires_the_rerank_chain_in_the_seed_order():
    edges = {(e.source, e.target, e.conditional) for e in compile_pipeline(rag_pipeline()).get_graph().edges}
    assert {("rerank", "memory_affinity", False), ("memory_affinity", "wiki_boost", False), ("wiki_boost", "chunk_merge", True)} <= edges


def test_every_preset_compiles():
    for name, make in PRESETS.items():
        assert compile_pipeline(make(), name=name).name == name


# --- runtime routing, with a search stage supplied by the test ---

def _search_node(outcome: dict):
    async def chunk_search_parallel(state, runtime):
        if outcome.get("cancel"):
            runtime.context.cancel_event.set()
        if outcome.get("raise"):
            raise RuntimeError("search store unreachable")
        if outcome.get("nothing"):
            return {"error": PipelineError(ErrorKind.SEARCH_NOTHING, "no hits")}
        return {"search_results": [{"id": "c1", "content": "Paris is the capital of France."}]}

    return chunk_search_parallel


def _core_stages():
    """The stages that need no knowledge base, so the tests below can supply their own search."""
    return {stage: STAGE_NODES[stage] for stage in (S.LOAD_HISTORY, S.QUERY_UNDERSTAND, S.CHAT_COMPLETION_STREAM)}


def _graph(outcome: dict):
    stages = {**_core_stages(), S.CHUNK_SEARCH_PARALLEL: StageSpec.of(_search_node(outcome), needs_retrieval=True, finds_nothing=True, window=ProgressWindow.KNOWLEDGE_SEARCH)}
    return compile_pipeline(dynamic_pipeline(), stages=stages, checkpointer=memory_saver())


async def _run(graph, request, context=None):
    context = context or RunContext(cancel_event=threading.Event(), services=Services())
    return [e async for e in stream_turn(graph, request, context)]


def _types(events):
    return [e.response_type.value for e in events]


def _json_reply(intent):
    return Reply.text(json.dumps({"rewrite_query": "capital of France", "intent": intent}))


def _is_rewrite(body):
    return "rewrite_query" in body["messages"][0]["content"]


async def test_search_nothing_routes_to_the_fallback_answer(scripted_model):
    scripted_model.on(_is_rewrite, _json_reply("kb_search"))
    request = PipelineRequest(query="capital?", knowledge_base_ids=["kb"], fallback_response="Nothing found.")
    events = await _run(_graph({"nothing": True}), request)
    answers = [e.content for e in events if e.response_type == ResponseType.ANSWER]
    assert answers == ["Nothing found."]
    assert _types(events)[-1] == "complete"


async def test_cancellation_is_checked_before_search_nothing(scripted_model):
    scripted_model.on(_is_rewrite, _json_reply("kb_search"))
    request = PipelineRequest(query="capital?", knowledge_base_ids=["kb"], fallback_response="Nothing found.")
    events = await _run(_graph({"nothing": True, "cancel": True}), request)
    assert ResponseType.ANSWER not in [e.response_type for e in events]
    assert events[-1].response_type == ResponseType.COMPLETE and events[-1].data == {"stopped": True}


async def test_retrieval_stages_are_skipped_when_the_intent_needs_no_retrieval(scripted_model):
    scripted_model.on(_is_rewrite, _json_reply("greeting"))
    scripted_model.on(lambda b: True, Reply.text("Hello there!"))
    events = await _run(_graph({"raise": True}), PipelineRequest(query="hi", knowledge_base_ids=["kb"]))
    assert "".join(e.content for e in events if e.response_type == ResponseType.ANSWER) == "Hello there!"
    assert "greet" in scripted_model.requests[-1]["messages"][0]["content"].lower()  # intent prompt override
    assert [e.data["tool_name"] for e in events if e.response_type == ResponseType.TOOL_CALL] == ["query_understand"]


async def test_progress_windows_open_and_close_in_pairs(scripted_model):
    scripted_model.on(_is_rewrite, _json_reply("kb_search"))
    events = await _run(_graph({}), PipelineRequest(query="capital?", knowledge_base_ids=["kb"]))
    windows = [(e.response_type.value, e.data["tool_name"]) for e in events if e.response_type in (ResponseType.TOOL_CALL, ResponseType.TOOL_RESULT)]
    assert windows == [
        ("tool_call", "query_understand"), ("tool_result", "query_understand"),
        ("tool_call", "knowledge_search"), ("tool_result", "knowledge_search"),
    ]


async def test_progress_window_closes_when_its_stage_fails(scripted_model):
    scripted_model.on(_is_rewrite, _json_reply("kb_search"))
    events = await _run(_graph({"raise": True}), PipelineRequest(query="capital?", knowledge_base_ids=["kb"]))
    closing = [e for e in events if e.response_type == ResponseType.TOOL_RESULT and e.data["tool_name"] == "knowledge_search"]
    assert len(closing) == 1 and closing[0].data["success"] is False
    assert _types(events)[-2:] == ["error", "complete"]


async def test_pure_chat_request_runs_the_chat_pipeline_only(scripted_model):
    scripted_model.on(lambda b: True, Reply.text("Plain answer"))
    events = await _run(_graph({"raise": True}), PipelineRequest(query="hello"))
    assert not [e for e in events if e.response_type == ResponseType.TOOL_CALL]
    assert len(scripted_model.requests) == 1  # no rewrite call


async def test_the_fallback_is_reached_only_where_a_search_can_find_nothing():
    edges = {(e.source, e.target) for e in compile_pipeline(rag_pipeline()).get_graph().edges}
    assert {source for source, target in edges if target == FALLBACK} == {"close_knowledge_search"}
    assert FALLBACK not in compile_pipeline(chat_pipeline()).get_graph().nodes


async def test_plain_json_request_is_validated_when_the_turn_begins(scripted_model):
    scripted_model.on(lambda b: True, Reply.text("ok"))
    graph = compile_pipeline(chat_pipeline(), checkpointer=memory_saver())
    result = await graph.ainvoke({"request": {"query": "hi", "summary": {"max_tokens": 5}}}, {"configurable": {"thread_id": "j"}}, context=RunContext(services=Services()))
    assert result["chat_response"].content == "ok"


async def test_invalid_request_ends_the_turn_with_a_clear_error(scripted_model):
    received = []
    graph = compile_pipeline(chat_pipeline(), checkpointer=memory_saver())
    result = await graph.ainvoke({"request": {"query": "hi", "rerank_top_k": 0}}, {"configurable": {"thread_id": "k"}}, context=RunContext(event_sink=received.append, services=Services()))
    assert result["error"].kind == ErrorKind.INVALID_INPUT and "rerank_top_k" in result["error"].message
    # no turn driver around this run (its context has no ids): the graph frames the turn itself
    assert [e.response_type for e in received] == [ResponseType.AGENT_QUERY, ResponseType.ERROR, ResponseType.COMPLETE]
    assert scripted_model.requests == []


async def test_agent_config_in_the_run_context_sets_request_defaults(scripted_model):
    from ragline.graph.request import AgentConfig

    graph = compile_pipeline(chat_pipeline(), checkpointer=memory_saver())
    await graph.ainvoke({"request": {"query": "hi"}}, {"configurable": {"thread_id": "a"}}, context=RunContext(agent=AgentConfig(summary={"max_tokens": 11}), services=Services()))
    assert scripted_model.requests[-1]["max_tokens"] == 11


def _parallel_search_stage(empty: bool = False):
    from ragline.graph.stages import Node, Parallel

    async def chunk_search_parallel(state, runtime):
        return {}

    async def chunk_search(state, runtime):
        return {"search_results": [] if empty else [{"id": "c1", "content": "chunk text"}]}

    async def entity_search(state, runtime):
        return {"search_results": [] if empty else [{"id": "c1", "content": "chunk text"}, {"id": "e1", "content": "entity text"}]}

    async def join(state, runtime):
        if not state.get("search_results"):
            return {"error": PipelineError(ErrorKind.SEARCH_NOTHING)}
        return {"user_content": ",".join(r["id"] for r in state["search_results"])}

    return StageSpec(
        (Node(chunk_search_parallel), Parallel((Node(chunk_search), Node(entity_search))), Node(join, "search_join")),
        needs_retrieval=True,
        finds_nothing=True,
        window=ProgressWindow.KNOWLEDGE_SEARCH,
    )


async def test_parallel_branches_merge_into_one_deduplicated_result_list(scripted_model):
    scripted_model.on(_is_rewrite, _json_reply("kb_search"))
    scripted_model.on(lambda b: True, Reply.text("answer"))
    graph = compile_pipeline(dynamic_pipeline(), stages={**_core_stages(), S.CHUNK_SEARCH_PARALLEL: _parallel_search_stage()}, checkpointer=memory_saver())
    events = await _run(graph, PipelineRequest(query="q", knowledge_base_ids=["kb"]))
    assert sorted(scripted_model.requests[-1]["messages"][-1]["content"].split(",")) == ["c1", "e1"]
    windows = [(e.response_type.value, e.data["tool_name"]) for e in events if e.data and "tool_name" in e.data]
    assert windows.count(("tool_call", "knowledge_search")) == 1 and windows.count(("tool_result", "knowledge_search")) == 1


async def test_both_branches_empty_is_search_nothing(scripted_model):
    scripted_model.on(_is_rewrite, _json_reply("kb_search"))
    graph = compile_pipeline(dynamic_pipeline(), stages={**_core_stages(), S.CHUNK_SEARCH_PARALLEL: _parallel_search_stage(empty=True)}, checkpointer=memory_saver())
    events = await _run(graph, PipelineRequest(query="q", knowledge_base_ids=["kb"], fallback_response="none"))
    assert [e.content for e in events if e.response_type == ResponseType.ANSWER] == ["none"]


async def test_each_turn_starts_from_clean_per_turn_keys_while_messages_persist(scripted_model):
    scripted_model.on(_is_rewrite, _json_reply("greeting"), times=1)
    scripted_model.on(lambda b: True, Reply.text("fine"))
    graph = _graph({})
    config = {"configurable": {"thread_id": "clean"}}
    first = await graph.ainvoke({"request": PipelineRequest(query="hello", knowledge_base_ids=["kb"])}, config, context=RunContext(services=Services()))
    assert first["intent"] == "greeting"
    second = await graph.ainvoke({"request": PipelineRequest(query="q", knowledge_base_ids=["kb"], rewrite_enabled=False)}, config, context=RunContext(services=Services()))
    state = (await graph.aget_state(config)).values
    assert second["intent"] == "" and state["system_prompt_override"] is None
    assert [m.type for m in state["messages"]] == ["human", "ai", "human", "ai"]


async def test_runtime_handles_never_reach_the_checkpoint(scripted_model):
    graph = compile_pipeline(chat_pipeline(), checkpointer=memory_saver())
    sink_marker = []
    config = {"configurable": {"thread_id": "handles"}}
    await graph.ainvoke({"request": {"query": "hi"}}, config, context=RunContext(event_sink=sink_marker.append, cancel_event=threading.Event(), services=Services()))
    saved = graph.checkpointer.get_tuple(config).checkpoint
    values = saved["channel_values"].values()
    assert not any(callable(v) or isinstance(v, (threading.Event, RunContext, Services)) for v in values)
    assert "event_sink" not in repr(saved)
    assert sink_marker  # the sink did receive events
