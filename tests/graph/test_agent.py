"""Agent mode through its graph (graph/agent.py): a scripted tool-calling model, a real knowledge base
(Chroma, bm25s, the local e5 embedder), the events the seed's agent sends."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from langgraph.types import Command

from ragline.checkpoints.savers import memory_saver
from ragline.contracts.context import RunContext, RunHost
from ragline.contracts.request import PipelineRequest
from ragline.graph.agent import build_agent_graph
from ragline.services import Services
from ragline.settings import Settings
from tests.agent_script import BIRTHPLACE, DESIGNER, QUESTION, CitingAnswer, alias_of, tool_messages
from tests.knowledge_base import create_knowledge_base
from tests.scripted_model import Reply, ScriptedCall

KB_TAG = re.compile(r'<kb chunk_id="([^"]+)"')


@pytest.fixture
def services(fresh_data_dir, scripted_model):
    services = Services.from_settings()
    create_knowledge_base(services, "people", {"Aurora": DESIGNER, "Holt": BIRTHPLACE})
    yield services
    asyncio.run(services.aclose())


async def run_turn(services: Services, query: str = QUESTION, **context: Any) -> list[dict[str, Any]]:
    graph = build_agent_graph()
    request = PipelineRequest(query=query, knowledge_base_ids=("people",))
    return [event async for event in graph.astream({"request": request}, context=RunContext(**context, host=RunHost(services=services)), stream_mode="custom")]


def kinds(frames: list[dict[str, Any]]) -> list[str]:
    return [("thought" if (f.get("data") or {}).get("thought") else f["response_type"]) for f in frames]


def answer_text(frames: list[dict[str, Any]], segment: int) -> str:
    return "".join(f["content"] for f in frames if f["response_type"] == "answer" and (f.get("data") or {}).get("segment") == segment)


async def test_two_search_rounds_then_an_answer_citing_passages_of_both(services, scripted_model):
    answer = CitingAnswer()
    scripted_model.on(lambda b: len(tool_messages(b)) == 0,
                      Reply.calling(ScriptedCall("search_knowledge", {"query": "who designed the Aurora sensor"}, id="s1"),
                                    text="First I look up who designed the Aurora sensor."))
    scripted_model.on(lambda b: len(tool_messages(b)) == 1,
                      Reply.calling(ScriptedCall("search_knowledge", {"query": "where was Mira Holt born"}, id="s2"),
                                    text="Now where Mira Holt was born."))
    scripted_model.on(lambda b: len(tool_messages(b)) == 2 and answer.cite(b), answer)
    frames = await run_turn(services)

    seen = kinds(frames)
    assert seen[0] == "agent_query" and seen[-1] == "complete"
    assert seen.count("agent_query") == 1 and seen.count("complete") == 1  # the driver frames the turn; the graph does not again
    assert [k for k in seen if k in ("thought", "tool_call", "tool_result", "references")] == [
        "thought", "tool_call", "tool_result", "thought", "tool_call", "tool_result", "references"]
    assert seen.index("references") < len(seen) - 2 and frames[-2]["response_type"] == "answer" and frames[-2]["done"]
    assert "context_compacted" not in seen  # two short rounds stay far below the loop's token budget
    calls = [f["data"] for f in frames if f["response_type"] == "tool_call"]
    assert [(c["tool_name"], c["arguments"]) for c in calls] == [("search_knowledge", {"query": "who designed the Aurora sensor"}),
                                                                ("search_knowledge", {"query": "where was Mira Holt born"})]
    results = [f["data"] for f in frames if f["response_type"] == "tool_result"]
    assert all(r["success"] for r in results) and all("passage" in r["output"] for r in results)
    thoughts = [f for f in frames if (f.get("data") or {}).get("thought")]
    assert thoughts[0]["content"] == "First I look up who designed the Aurora sensor." and thoughts[0]["data"]["superseded_segment"] == 0
    assert answer_text(frames, 0) == thoughts[0]["content"]  # the introduction streamed, then superseded

    final = answer_text(frames, 2)
    cited = KB_TAG.findall(final)
    references = {r["chunk_id"]: r["content"] for f in frames if f["response_type"] == "references" for r in f["knowledge_references"]}
    assert len(cited) == 2 and set(cited) <= set(references)
    assert "designed by" in references[cited[0]] and "born in" in references[cited[1]]
    assert "<ref" not in final and final.startswith("Mira Holt designed it")
    # the second round's model request still holds the first round's passages under the same handle
    assert alias_of(scripted_model.requests[2], "designed by") == alias_of(scripted_model.requests[1], "designed by")


async def test_a_failing_tool_gives_a_failed_result_and_the_loop_goes_on(services, scripted_model):
    scripted_model.on(lambda b: len(tool_messages(b)) == 0,
                      Reply.calling(ScriptedCall("read_chunks", {"document_id": "no-such-document"}, id="r1"), text="Reading it."))
    scripted_model.on(lambda b: len(tool_messages(b)) == 1, Reply.text("I could not read that document."))
    frames = await run_turn(services)

    [result] = [f["data"] for f in frames if f["response_type"] == "tool_result"]
    assert result["success"] is False and result["tool_name"] == "read_chunks" and "no document 'no-such-document'" in result["error"]
    assert "error" not in kinds(frames)
    assert tool_messages(scripted_model.requests[-1]) == [f"Error: {result['error']}"]  # the model read the error as the result
    assert answer_text(frames, 1) == "I could not read that document." and kinds(frames)[-1] == "complete"


async def test_malformed_arguments_are_answered_with_their_error_and_never_run(services, scripted_model):
    scripted_model.on(lambda b: len(tool_messages(b)) == 0, Reply.calling(ScriptedCall("search_knowledge", '{"query": ', id="m1")))
    scripted_model.on(lambda b: len(tool_messages(b)) == 1, Reply.text("Sorry."))
    frames = await run_turn(services)
    [result] = [f["data"] for f in frames if f["response_type"] == "tool_result"]
    assert result["success"] is False and "not valid JSON" in result["error"]


async def test_the_round_limit_ends_the_loop_with_an_answer(services, scripted_model):
    services.settings = services.settings.model_copy(update={"agent_max_rounds": 2})
    scripted_model.on(lambda b: "tools" not in b, Reply.text("Mira Holt, as far as I found."))
    scripted_model.on(lambda b: True, Reply.calling(ScriptedCall("search_knowledge", {"query": "Aurora sensor designer"}), text="Searching."))
    frames = await run_turn(services)

    assert kinds(frames).count("tool_call") == 2
    [reflection] = [f for f in frames if f["response_type"] == "reflection"]
    assert reflection["data"] == {"limit": "max_rounds", "value": 2} and "limit of 2 tool rounds" in reflection["content"]
    last = scripted_model.requests[-1]
    assert "tools" not in last and "Answer the question now" in last["messages"][-1]["content"]
    assert answer_text(frames, 2) == "Mira Holt, as far as I found." and kinds(frames)[-2:] == ["answer", "complete"]


async def test_the_local_model_is_refused_with_a_clear_error_before_any_loop(services, scripted_model):
    graph = build_agent_graph()
    request = PipelineRequest(query=QUESTION, knowledge_base_ids=("people",), chat_model="ragline/qwen2.5-coder-1.5b-instruct")
    frames = [event async for event in graph.astream({"request": request}, context=RunContext(host=RunHost(services=services)), stream_mode="custom")]
    [error] = [f for f in frames if f["response_type"] == "error"]
    assert error["content"].startswith("agent mode needs a model with tool calling; the local model ragline/qwen2.5-coder-1.5b-instruct")
    assert error["done"] and kinds(frames)[-1] == "complete" and not any(f["response_type"] == "tool_call" for f in frames)
    assert scripted_model.requests == []


async def test_a_refused_question_raises_before_any_loop(services, scripted_model):
    """As in the pipeline, a refused request is raised (TurnFailed), not routed to the end."""
    from ragline.contracts.state import ErrorKind, TurnFailed

    with pytest.raises(TurnFailed) as refused:
        await run_turn(services, "<script>x()</script>")
    assert refused.value.error.kind == ErrorKind.INPUT_REFUSED and scripted_model.requests == []


def _text_of(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content") or "") for m in body.get("messages", []))


async def test_near_its_token_budget_the_loop_summarises_its_earlier_rounds(services, scripted_model):
    services.settings = services.settings.model_copy(update={"agent_context_tokens": 256})  # compact at 192 tokens
    scripted_model.on(lambda b: "Write the notes you need" in _text_of(b), Reply.text("Mira Holt designed the Aurora sensor (c1)."))
    scripted_model.on(lambda b: "My notes from 1 earlier tool rounds" in _text_of(b), Reply.text("She was born in Tromsø."))
    scripted_model.on(lambda b: len(tool_messages(b)) == 0,
                      Reply.calling(ScriptedCall("search_knowledge", {"query": "who designed the Aurora sensor"}, id="s1")))
    scripted_model.on(lambda b: len(tool_messages(b)) == 1,
                      Reply.calling(ScriptedCall("search_knowledge", {"query": "where was Mira Holt born"}, id="s2")))
    frames = await run_turn(services)

    [compacted] = [f for f in frames if f["response_type"] == "context_compacted"]
    assert compacted["data"]["rounds"] == 1 and compacted["data"]["tokens_after"] < compacted["data"]["tokens_before"]
    assert kinds(frames).index("context_compacted") > max(i for i, k in enumerate(kinds(frames)) if k == "tool_result")
    summary_request = next(b for b in scripted_model.requests if "Write the notes you need" in _text_of(b))
    assert "designed by" in _text_of(summary_request) and "tools" not in summary_request  # the first round's passages, summarised
    final = scripted_model.requests[-1]
    assert len(tool_messages(final)) == 1 and "Mira Holt designed the Aurora sensor (c1)." in _text_of(final)
    assert [m.get("tool_calls", [{}])[0].get("id") for m in final["messages"] if m.get("tool_calls")] == ["s2"]  # round 1 left the prompt
    references = [r["content"] for f in frames if f["response_type"] == "references" for r in f["knowledge_references"]]
    assert any("designed by" in r for r in references)  # the answer's sources still hold every round's passages
    assert answer_text(frames, 2) == "She was born in Tromsø." and kinds(frames)[-1] == "complete"


async def test_a_message_in_the_inbox_is_injected_at_the_next_step_and_kept_in_the_conversation(services, scripted_model):
    told = "Answer in German."
    inbox = [[], [told]]  # empty before the first model call, the message before the second

    async def take() -> list[str]:
        return inbox.pop(0) if inbox else []

    scripted_model.on(lambda b: len(tool_messages(b)) == 0,
                      Reply.calling(ScriptedCall("search_knowledge", {"query": "who designed the Aurora sensor"}, id="s1")))
    scripted_model.on(lambda b: any(m.get("content") == told for m in b["messages"]), Reply.text("In Tromsø."))
    graph = build_agent_graph(checkpointer=memory_saver())
    config = {"configurable": {"thread_id": "injected"}}
    request = PipelineRequest(query=QUESTION, knowledge_base_ids=("people",))
    frames = [event async for event in graph.astream({"request": request}, config, context=RunContext(host=RunHost(services=services, inbox=take)),
                                                     stream_mode="custom")]

    [injected] = [f for f in frames if f["response_type"] == "user_message_injected"]
    assert injected["content"] == told and kinds(frames).index("user_message_injected") > kinds(frames).index("tool_result")
    second = scripted_model.requests[1]["messages"]
    assert second[-1] == {"role": "user", "content": told}  # after the tool round it answers
    assert answer_text(frames, 1) == "In Tromsø."
    saved = (await graph.aget_state(config)).values["messages"]
    assert [(m.type, m.content) for m in saved] == [("human", QUESTION), ("human", told), ("ai", "In Tromsø.")]


# --- tool approval (nodes/agent/approval.py) ---


def _script_one_search(scripted_model: Any) -> None:
    scripted_model.on(lambda b: len(tool_messages(b)) == 0,
                      Reply.calling(ScriptedCall("search_knowledge", {"query": "who designed the Aurora sensor"}, id="s1"), text="Looking it up."))
    scripted_model.on(lambda b: len(tool_messages(b)) == 1, Reply.text("Mira Holt."))


async def _paused_at_approval(services: Services, thread: str) -> tuple[Any, dict[str, Any], RunContext, list[dict[str, Any]]]:
    graph = build_agent_graph(checkpointer=memory_saver())
    config = {"configurable": {"thread_id": thread}}
    context = RunContext(approval_tools=("search_knowledge",), host=RunHost(services=services))
    request = PipelineRequest(query=QUESTION, knowledge_base_ids=("people",))
    frames = [event async for event in graph.astream({"request": request}, config, context=context, stream_mode="custom")]
    return graph, config, context, frames


async def test_a_call_to_a_tool_needing_approval_waits_at_an_interrupt_then_runs_once_approved(services, scripted_model):
    _script_one_search(scripted_model)
    graph, config, context, frames = await _paused_at_approval(services, "approved")

    [required] = [f for f in frames if f["response_type"] == "tool_approval_required"]
    assert required["data"] == {"tool_call_id": "s1", "tool_name": "search_knowledge", "arguments": {"query": "who designed the Aurora sensor"}}
    assert "tool_call" not in kinds(frames) and "complete" not in kinds(frames)  # nothing ran: the run waits
    paused = await graph.aget_state(config)
    assert paused.next == ("approval",)
    assert paused.tasks[0].interrupts[0].value == {"tool_approval_required": [required["data"]]}  # in the checkpoint
    assert len(scripted_model.requests) == 1

    resumed = [event async for event in graph.astream(Command(resume={"s1": True}), config, context=context, stream_mode="custom")]
    seen = kinds(resumed)
    assert seen[:3] == ["tool_approval_resolved", "tool_call", "tool_result"] and seen[-1] == "complete"
    assert resumed[0]["data"] == {"tool_call_id": "s1", "tool_name": "search_knowledge", "approved": True, "reason": ""}
    assert resumed[2]["data"]["success"] is True and "passage" in resumed[2]["data"]["output"]
    assert "designed by" in tool_messages(scripted_model.requests[-1])[0]  # the model read the search's passages
    assert answer_text(resumed, 1) == "Mira Holt."


async def test_a_denied_call_is_answered_with_the_refusal_and_never_run(services, scripted_model):
    _script_one_search(scripted_model)
    graph, config, context, _ = await _paused_at_approval(services, "denied")
    resumed = [event async for event in graph.astream(Command(resume={"approved": False, "reason": "not the archive"}), config,
                                                      context=context, stream_mode="custom")]

    [resolved] = [f["data"] for f in resumed if f["response_type"] == "tool_approval_resolved"]
    assert (resolved["approved"], resolved["reason"]) == (False, "not the archive")
    [result] = [f["data"] for f in resumed if f["response_type"] == "tool_result"]
    assert result["success"] is False and result["error"] == "not run: the user denied this call: not the archive"
    assert tool_messages(scripted_model.requests[-1]) == [f"Error: {result['error']}"]
    references = [r for f in resumed if f["response_type"] == "references" for r in f["knowledge_references"]]
    assert references == []  # no search ran, so no passage was given
    assert kinds(resumed)[-1] == "complete"


async def test_tools_not_marked_for_approval_run_at_once(services, scripted_model):
    _script_one_search(scripted_model)
    frames = await run_turn(services, approval_tools=("web_fetch",))
    assert "tool_approval_required" not in kinds(frames) and kinds(frames).count("tool_result") == 1 and kinds(frames)[-1] == "complete"



async def test_an_assistant_naming_no_tools_is_offered_those_that_stay_inside_the_service():
    from ragline.nodes.agent.loop import offered_tools
    from ragline.nodes.tools import DEFAULT_TOOLS, TOOLS

    services = Services(Settings(redis_url=None))
    offered = [tool.name for tool in (await offered_tools(RunContext(), services))[0]]
    assert offered == list(DEFAULT_TOOLS) and "web_search" not in offered and "web_fetch" not in offered
    named = [tool.name for tool in (await offered_tools(RunContext(agent_tools=("web_fetch", "search_knowledge")), services))[0]]
    assert named == ["search_knowledge", "web_fetch"] and set(TOOLS) > set(DEFAULT_TOOLS)


def _pictured(message: dict) -> tuple[str, list[str]]:
    """(the text, the image URLs) of a message with content parts."""
    parts = message["content"]
    return " ".join(p["text"] for p in parts if p["type"] == "text"), [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]


@pytest.mark.parametrize("sees", [True, False])
async def test_search_knowledge_keeps_the_picture_the_reranker_dropped_and_a_model_that_sees_gets_it(tmp_path, scripted_model, sees):
    """The seed's image candidates: the chart, found by its own vector (0.3 to the question: past the
    recall bar, under the rerank rule's), is dropped by the text reranker yet given to the model as a
    passage with a handle; a vision model's next round carries the picture labelled with it."""
    import base64

    from ragline.contracts.passages import ChunkType
    from ragline.graph.turn import stream_turn
    from tests.image_chain import CHART_PNG, image_chain_services, image_chain_settings, report_pdf
    from tests.image_vectors import QUESTION as CHART_QUESTION
    from tests.image_vectors import script_vectors

    script_vectors(scripted_model, 0.3)
    settings = image_chain_settings(scripted_model, tmp_path, **({} if sees else {"vision_models": []}))
    core = image_chain_services(tmp_path, settings, scripted_model)
    kb = core.retrieval.knowledge_bases.create("station", "default")
    (tmp_path / "report.pdf").write_bytes(report_pdf())
    knowledge = await core.ingestion.ingest_file(kb.id, tmp_path / "report.pdf")
    [chart] = [c for c in core.retrieval.catalog.chunks_of(knowledge.id) if c.chunk_type == ChunkType.IMAGE_VECTOR]
    scripted_model.on(lambda b: "tools" in b and not tool_messages(b), Reply.calling(ScriptedCall("search_knowledge", {"query": CHART_QUESTION}, id="s1")))
    scripted_model.on(lambda b: "tools" in b and len(tool_messages(b)) == 1, Reply.text("Monthly rainfall bars."))
    request = PipelineRequest(query=CHART_QUESTION, knowledge_base_ids=[kb.id])
    events = [e async for e in stream_turn(build_agent_graph(checkpointer=memory_saver()), request, RunContext(session_id="s-agent-chart", host=RunHost(services=core)))]

    assert [e.knowledge_references for e in events if e.response_type == "references"][0][-1]["chunk_id"] == chart.id
    assert scripted_model.rerank_requests  # the reranker ran, and turned the picture down
    [result] = tool_messages(scripted_model.requests[1])
    handle = re.findall(r'<result id="(c\d+)"', result)[-1]  # the picture's passage, after the reranked ones
    pictured = [m for m in scripted_model.requests[1]["messages"] if m["role"] == "user" and isinstance(m["content"], list)]
    if not sees:
        assert pictured == []
        return
    [message] = pictured
    text, urls = _pictured(message)
    assert urls == ["data:image/png;base64," + base64.b64encode(CHART_PNG).decode()] and f"from {handle} " in text
