import pytest

from ragline.checkpoints.savers import memory_saver
from ragline.contracts.events import ResponseType
from ragline.contracts.request import PipelineRequest
from ragline.generation.answer import TRUNCATED_EMPTY_HINT
from ragline.graph.graphs import build_graph
from tests.nodes.helpers import answer_text, of_type, run_turn
from tests.scripted_model import Reply


async def test_thinking_and_answer_deltas_are_kept_apart(scripted_model):
    scripted_model.on(lambda b: True, Reply(reasoning=["Let me ", "think."], chunks=["Paris", "."]))
    events = await run_turn("chat_stream", PipelineRequest(query="capital of France?"))
    assert "".join(e.content for e in of_type(events, ResponseType.THINKING)) == "Let me think."
    assert answer_text(events) == "Paris."


async def test_inline_think_tags_become_thinking_deltas(scripted_model):
    scripted_model.on(lambda b: True, Reply(chunks=["<thi", "nk>hmm</th", "ink>Par", "is"]))
    events = await run_turn("chat_stream", PipelineRequest(query="q"))
    assert "".join(e.content for e in of_type(events, ResponseType.THINKING)) == "hmm"
    assert answer_text(events) == "Paris"


async def test_a_provider_that_signals_the_end_twice_yields_one_terminal_event(scripted_model):
    scripted_model.on(lambda b: True, Reply(chunks=["ok"], double_finish=True))
    events = await run_turn("chat_stream", PipelineRequest(query="q"))
    terminal = [e for e in of_type(events, ResponseType.ANSWER) if e.done]
    assert len(terminal) == 1
    assert events[-1].response_type == ResponseType.COMPLETE
    assert events.index(terminal[0]) < len(events) - 1


async def test_truncation_by_length_is_flagged_on_the_answer(scripted_model):
    scripted_model.on(lambda b: True, Reply(chunks=["partial"], finish_reason="length"))
    events = await run_turn("chat_stream", PipelineRequest(query="q"))
    terminal = [e for e in of_type(events, ResponseType.ANSWER) if e.done][0]
    assert terminal.data == {"truncated": True}
    assert answer_text(events) == "partial"


async def test_truncation_with_no_text_sends_the_fixed_hint(scripted_model):
    scripted_model.on(lambda b: True, Reply(chunks=[], finish_reason="MAX_TOKENS"))
    events = await run_turn("chat_stream", PipelineRequest(query="q"))
    assert answer_text(events) == TRUNCATED_EMPTY_HINT


async def test_provider_errors_become_a_terminal_error_event(scripted_model):
    scripted_model.on(lambda b: True, Reply(status=400, error="model overloaded"))
    events = await run_turn("chat_stream", PipelineRequest(query="q"))
    errors = of_type(events, ResponseType.ERROR)
    assert len(errors) == 1 and errors[0].done and "model overloaded" in errors[0].content
    assert events[-1].response_type == ResponseType.COMPLETE


async def test_summary_config_options_reach_the_provider(scripted_model):
    request = PipelineRequest(query="q", summary={"temperature": 0.1, "top_p": 0.5, "seed": 7, "max_tokens": 33})
    await run_turn("chat_stream", request)
    body = scripted_model.requests[-1]
    assert (body["temperature"], body["top_p"], body["seed"], body["max_tokens"]) == (0.1, 0.5, 7, 33)


async def test_messages_are_system_then_history_then_current_question(scripted_model):
    graph = build_graph("chat_history_stream", checkpointer=memory_saver())
    scripted_model.on(lambda b: True, Reply.text("first answer"), times=1)
    await run_turn("", PipelineRequest(query="first question"), graph=graph)
    await run_turn("", PipelineRequest(query="second question"), graph=graph)
    roles = [(m["role"], m["content"]) for m in scripted_model.requests[-1]["messages"]]
    assert [r for r, _ in roles] == ["system", "user", "assistant", "user"]
    assert roles[1:] == [("user", "first question"), ("assistant", "first answer"), ("user", "second question")]


async def test_request_system_prompt_replaces_the_default_and_is_rendered(scripted_model):
    await run_turn("chat_stream", PipelineRequest(query="q", language="French", summary={"prompt": "Answer in {language}."}))
    assert scripted_model.requests[-1]["messages"][0]["content"] == "Answer in French."


async def test_answer_is_recorded_in_the_conversation(scripted_model):
    graph = build_graph("chat_stream", checkpointer=memory_saver())
    scripted_model.on(lambda b: True, Reply.text("stored answer"))
    await run_turn("", PipelineRequest(query="q"), graph=graph, session_id="keep")
    state = await graph.aget_state({"configurable": {"thread_id": "keep"}})
    assert [(m.type, m.content) for m in state.values["messages"]] == [("human", "q"), ("ai", "stored answer")]
    assert state.values["chat_response"].content == "stored answer"


@pytest.mark.parametrize("reply", [
    Reply(status=429, error="rate limited"),
    Reply(status=500, error="upstream exploded"),
    Reply(raw="{not json at all"),
], ids=["429", "500", "malformed JSON"])
async def test_a_failing_provider_ends_the_answer_in_one_error_event_and_complete(scripted_model, reply):
    scripted_model.on(lambda b: True, reply)
    events = await run_turn("chat_stream", PipelineRequest(query="q"))
    errors = of_type(events, ResponseType.ERROR)
    assert len(errors) == 1 and errors[0].data["code"] == "model_call" and errors[0].done
    assert answer_text(events) == "" and events[-1].response_type == ResponseType.COMPLETE


async def test_a_stream_cut_short_keeps_the_text_shown_and_ends_in_an_error(scripted_model):
    scripted_model.on(lambda b: True, Reply(chunks=["Paris ", "is ", "the ", "capital."], cut_after=2))
    events = await run_turn("chat_stream", PipelineRequest(query="q"))
    assert answer_text(events).startswith("Paris is")
    assert [e.data["code"] for e in of_type(events, ResponseType.ERROR)] == ["model_call"]
    assert events[-1].response_type == ResponseType.COMPLETE
