from ragline.contracts.events import ResponseType
from ragline.contracts.request import PipelineRequest
from tests.nodes.helpers import of_type, run_turn
from tests.scripted_model import Reply


async def test_one_call_answer_is_sent_as_one_terminal_event(scripted_model):
    scripted_model.on(lambda b: True, Reply(chunks=["Paris", " is the capital."], reasoning=["thought"]))
    events = await run_turn("chat", PipelineRequest(query="q"))
    answers = of_type(events, ResponseType.ANSWER)
    assert [(a.content, a.done) for a in answers] == [("Paris is the capital.", True)]
    assert of_type(events, ResponseType.THINKING)[0].content == "thought"
    assert scripted_model.requests[-1].get("stream") in (None, False)


async def test_non_streaming_truncation_is_flagged(scripted_model):
    scripted_model.on(lambda b: True, Reply(chunks=["cut"], finish_reason="length"))
    events = await run_turn("chat", PipelineRequest(query="q"))
    assert of_type(events, ResponseType.ANSWER)[0].data == {"truncated": True}


async def test_non_streaming_provider_error_becomes_an_error_event(scripted_model):
    scripted_model.on(lambda b: True, Reply(status=401, error="bad key"))
    events = await run_turn("chat", PipelineRequest(query="q"))
    assert "bad key" in of_type(events, ResponseType.ERROR)[0].content
