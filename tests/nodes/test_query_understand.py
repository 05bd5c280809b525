import pytest

from ragline.graph.request import PipelineRequest
from ragline.graph.state import HistoryTurn, TurnIds
from ragline.nodes.query_understand import (
    build_messages,
    intent_prompt_override,
    query_understand,
)
from ragline.settings import get_settings
from tests.nodes.helpers import node_runtime
from tests.scripted_model import Reply


@pytest.fixture(autouse=True)
def rewrite_call_on_every_turn(monkeypatch):
    """These tests are about the rewrite call; first turns without it are in tests/generation/test_intents.py."""
    monkeypatch.setenv("RAGLINE_FIRST_TURN_INTENT", "model")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _state(request, history=()):
    return {"request": request, "turn": TurnIds("s", "r", "u", "a"), "history": list(history)}


async def test_rewrite_uses_the_conversation_and_returns_intent(scripted_model):
    scripted_model.on(lambda b: True, Reply.text('{"rewrite_query": "How tall is the Eiffel Tower?", "intent": "kb_search"}'))
    history = [HistoryTurn("r0", "Tell me about the Eiffel Tower", "It is in Paris.")]
    update = await query_understand(_state(PipelineRequest(query="How tall is it?"), history), node_runtime())
    assert update["rewrite_query"] == "How tall is the Eiffel Tower?" and update["intent"] == "kb_search"
    prompt = scripted_model.requests[-1]["messages"][1]["content"]
    assert "Tell me about the Eiffel Tower" in prompt and "How tall is it?" in prompt


async def test_rewrite_disabled_keeps_the_query_without_a_model_call(scripted_model):
    update = await query_understand(_state(PipelineRequest(query="q", rewrite_enabled=False)), node_runtime())
    assert update == {"rewrite_query": "q", "intent": ""} and scripted_model.requests == []


async def test_model_failure_keeps_the_original_query_and_empty_intent(scripted_model):
    scripted_model.on(lambda b: True, Reply(status=400, error="down"))
    history = [HistoryTurn("r0", "earlier question", "earlier answer")]  # a follow-up needs the model
    update = await query_understand(_state(PipelineRequest(query="original"), history), node_runtime())
    assert (update["rewrite_query"], update["intent"]) == ("original", "")


async def test_a_failing_small_model_falls_back_to_the_chat_model(scripted_model, monkeypatch):
    monkeypatch.setenv("RAGLINE_QUERY_UNDERSTAND_MODEL", "openai/small-model-not-configured")
    monkeypatch.setenv("OPENAI_API_BASE", "http://127.0.0.1:9/v1")  # nothing listens on the discard port
    get_settings.cache_clear()
    scripted_model.on(lambda b: True, Reply.text('{"rewrite_query": "via chat model", "intent": "greeting"}'))
    update = await query_understand(_state(PipelineRequest(query="hi")), node_runtime())
    assert update["rewrite_query"] == "via chat model"


def test_request_rewrite_prompts_override_the_template():
    request = PipelineRequest(query="q", rewrite_prompt_system="SYS {language}", rewrite_prompt_user="USER {query}", language="German")
    messages = build_messages(_state(request))
    assert [m["content"] for m in messages] == ["SYS German", "USER q"]


@pytest.mark.parametrize("intent", ["kb_search", "clarification", "summarize", ""])
def test_retrieval_intents_get_no_prompt_override(intent):
    assert intent_prompt_override(intent, PipelineRequest(query="q")) is None


def test_non_retrieval_intent_uses_intent_prompts_yaml():
    assert "greet" in intent_prompt_override("greeting", PipelineRequest(query="q")).lower()


def test_web_search_intent_without_web_search_tells_the_user_it_is_unavailable():
    assert "not available" in intent_prompt_override("web_search", PipelineRequest(query="q"))
    assert intent_prompt_override("web_search", PipelineRequest(query="q", web_search_enabled=True)) is None


def test_agent_overrides_win_over_the_yaml_intent_prompts():
    assert intent_prompt_override("chitchat", PipelineRequest(query="q", intent_prompts={"chitchat": "Be brief."})) == "Be brief."
    assert intent_prompt_override("chitchat", PipelineRequest(query="q", system_prompt_override="Override.")) == "Override."


def test_image_questions_go_to_the_vision_model_with_image_parts():
    request = PipelineRequest(query="what is this?", images=[{"url": "data:image/png;base64,AAAA"}], vlm_model="openai/vlm")
    user = build_messages(_state(request))[1]["content"]
    assert user[1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
