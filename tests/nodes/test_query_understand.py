import pytest

from ragline.contracts.request import PipelineRequest
from ragline.contracts.state import HistoryTurn, TurnIds
from ragline.nodes.query_understand import (
    build_messages,
    intent_prompt_override,
    query_understand,
)
from ragline.settings import Settings, get_settings
from tests.conftest import SCRIPTED
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
    messages = build_messages(_state(request), Settings())
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
    user = build_messages(_state(request), Settings())[1]["content"]
    assert user[1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}


@pytest.fixture
def exemplar_intents(monkeypatch):
    """The shipped setting: intents from exemplars where no rewrite is needed."""
    monkeypatch.setenv("RAGLINE_FIRST_TURN_INTENT", "exemplars")
    get_settings.cache_clear()


BATTERY_ROUND = HistoryTurn("r0", "What batteries does the outdoor sensor use?", "The outdoor sensor runs on two AA batteries.")


async def test_a_follow_up_that_stands_on_its_own_goes_like_a_first_turn_without_a_model_call(scripted_model, exemplar_intents):
    question = "How do I reset the rainfall total?"
    update = await query_understand(_state(PipelineRequest(query=question), [BATTERY_ROUND]), node_runtime())
    assert scripted_model.requests == []
    assert update["rewrite_query"] == question and update["intent"] == "kb_search"


async def test_a_follow_up_that_refers_back_is_rewritten_by_the_model(scripted_model, exemplar_intents):
    scripted_model.on(lambda b: True, Reply.text('{"rewrite_query": "How long do the outdoor sensor batteries last?", "intent": "kb_search"}'))
    update = await query_understand(_state(PipelineRequest(query="And how long does it last?"), [BATTERY_ROUND]), node_runtime())
    assert len(scripted_model.requests) == 1 and update["rewrite_query"] == "How long do the outdoor sensor batteries last?"


async def test_the_always_setting_rewrites_every_follow_up(scripted_model, exemplar_intents, monkeypatch):
    monkeypatch.setenv("RAGLINE_FOLLOWUP_REWRITE", "always")
    get_settings.cache_clear()
    scripted_model.on(lambda b: True, Reply.text('{"rewrite_query": "How do I reset the rainfall total?", "intent": "kb_search"}'))
    await query_understand(_state(PipelineRequest(query="How do I reset the rainfall total?"), [BATTERY_ROUND]), node_runtime())
    assert len(scripted_model.requests) == 1


async def test_the_rewrite_reads_the_newest_rounds_within_its_token_budget(scripted_model):
    scripted_model.on(lambda b: True, Reply.text('{"rewrite_query": "q", "intent": "kb_search"}'))
    history = [HistoryTurn(f"r{n}", f"question number {n}", f"answer {n} " + "filler words " * 300) for n in range(5)]
    await query_understand(_state(PipelineRequest(query="And how long does it last?"), history), node_runtime())
    prompt = scripted_model.requests[-1]["messages"][1]["content"]
    assert "question number 4" in prompt and "question number 0" not in prompt
    assert len(prompt.split()) < 300  # five rounds of 600 words each, read as a few hundred tokens at most


async def test_the_rewrite_output_is_capped_at_a_short_json(scripted_model):
    scripted_model.on(lambda b: True, Reply.text('{"rewrite_query": "q", "intent": "kb_search"}'))
    await query_understand(_state(PipelineRequest(query="And how long does it last?"), [BATTERY_ROUND]), node_runtime())
    assert scripted_model.requests[-1]["max_tokens"] <= 128  # a looping small model stops within seconds


def test_the_rewrite_system_prompt_is_the_same_on_every_turn_so_the_prompt_cache_keeps_it():
    one = build_messages(_state(PipelineRequest(query="How tall is it?")), Settings(), conversation="User: a\nAssistant: b")
    two = build_messages(_state(PipelineRequest(query="电池能用多久？", language="Chinese")), Settings(), conversation="(none)")
    assert one[0]["content"] == two[0]["content"]


async def test_a_text_rewrite_is_not_asked_for_an_image_description(scripted_model):
    scripted_model.on(lambda b: True, Reply.text('{"rewrite_query": "q", "intent": "kb_search"}'))
    await query_understand(_state(PipelineRequest(query="And how long does it last?"), [BATTERY_ROUND]), node_runtime())
    schema = scripted_model.requests[-1]["response_format"]["json_schema"]["schema"]
    assert set(schema["properties"]) == {"rewrite_query", "intent"}


async def test_an_image_round_may_write_2048_tokens_and_a_text_round_far_fewer(scripted_model):
    """Seed: an image round's output must hold the image's whole OCR text (max_tokens 2048)."""
    scripted_model.on(lambda b: True, Reply.text('{"rewrite_query": "q", "intent": "kb_search", "image_description": "a sensor"}'))
    request = PipelineRequest(query="What is this?", images=[{"url": "data:image/png;base64,AAAA"}], vlm_model=SCRIPTED)
    await query_understand(_state(request, [BATTERY_ROUND]), node_runtime())
    assert scripted_model.requests[-1]["max_tokens"] == 2048
    await query_understand(_state(PipelineRequest(query="And how long does it last?"), [BATTERY_ROUND]), node_runtime())
    assert scripted_model.requests[-1]["max_tokens"] < 2048
