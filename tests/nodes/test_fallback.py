from ragline.contracts.events import ResponseType
from ragline.contracts.request import PipelineRequest
from ragline.contracts.state import ErrorKind, PipelineError
from ragline.nodes.fallback import fallback, fixed_response
from tests.nodes.helpers import node_runtime
from tests.scripted_model import Reply

TURN_STATE = {"turn": None}


def _Runtime(sink):
    return node_runtime(event_sink=sink)


def _state(request):
    from ragline.contracts.state import TurnIds

    return {"request": request, "turn": TurnIds("s", "r", "u", "a"), "error": PipelineError(ErrorKind.SEARCH_NOTHING)}


async def test_fixed_strategy_sends_the_fixed_text_at_once():
    received = []
    update = await fallback(_state(PipelineRequest(query="q", fallback_response="Nothing here.")), _Runtime(received.append))
    assert [(e.content, e.done) for e in received if e.response_type == ResponseType.ANSWER] == [("Nothing here.", True)]
    assert received[-1].response_type == ResponseType.COMPLETE  # no driver around this node: the graph ends the turn's frame
    assert update["chat_response"].fallback and update["error"] is None


def test_fixed_text_defaults_to_fallback_yaml_in_the_question_language():
    assert "could not find" in fixed_response(PipelineRequest(query="where is it?"))
    assert "没有找到" in fixed_response(PipelineRequest(query="它在哪里？"))


async def test_model_strategy_lets_the_model_answer_with_the_fallback_prompt(scripted_model):
    scripted_model.on(lambda b: True, Reply.text("Not in your documents, but generally..."))
    received = []
    request = PipelineRequest(query="what is X?", fallback_strategy="model", fallback_prompt="Nothing found for {query}.")
    update = await fallback(_state(request), _Runtime(received.append))
    assert scripted_model.requests[-1]["messages"][-1]["content"] == "Nothing found for what is X?."
    assert "".join(e.content for e in received if e.response_type == ResponseType.ANSWER) == "Not in your documents, but generally..."
    assert update["chat_response"].fallback
