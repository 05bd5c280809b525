import pytest

from ragline import defaults
from ragline.contracts.request import PipelineRequest
from ragline.contracts.state import HistoryTurn, TurnIds
from ragline.models.embeddings import Embedder
from ragline.models.intents import ExemplarIntents, decide
from ragline.nodes.query_understand import query_understand
from ragline.settings import get_settings
from tests.nodes.helpers import node_runtime
from tests.scripted_model import Reply


def test_small_talk_must_beat_every_question_exemplar_by_the_margin():
    clear = defaults.INTENT_EXEMPLAR_MIN_SCORE + 0.05
    beaten = clear - defaults.INTENT_EXEMPLAR_MARGIN - 0.005
    close = clear - defaults.INTENT_EXEMPLAR_MARGIN + 0.005
    assert decide({"greeting": clear, "kb_search": beaten}, web_search=False).intent == "greeting"
    assert decide({"greeting": clear, "kb_search": close}, web_search=False).intent == "kb_search"


def test_small_talk_below_the_floor_is_searched():
    low = defaults.INTENT_EXEMPLAR_MIN_SCORE - 0.01
    assert decide({"chitchat": low, "kb_search": low - 0.2}, web_search=False).intent == "kb_search"
    assert decide({"chitchat": low + 0.02, "kb_search": low - 0.2}, web_search=False).intent == "chitchat"


def test_web_search_is_only_chosen_when_the_request_allows_it():
    best = {"web_search": 0.95, "kb_search": 0.8}
    assert decide(best, web_search=False).intent == "kb_search"
    assert decide(best, web_search=True).intent == "web_search"


@pytest.fixture(scope="module")
def intents():
    return ExemplarIntents(Embedder("ragline/multilingual-e5-small"))


@pytest.mark.parametrize(("question", "intent"), [
    ("hello!", "greeting"),
    ("你好", "greeting"),
    ("who are you?", "chitchat"),
    ("What battery does the outdoor sensor use and how long does it last?", "kb_search"),
    ("battery life", "kb_search"),
    ("莱索托哪一年独立？", "kb_search"),
])
async def test_the_real_embedder_separates_small_talk_from_questions(intents, question, intent):
    assert (await intents.classify(question, web_search=False)).intent == intent


def _state(query, history=()):
    return {"request": PipelineRequest(query=query), "turn": TurnIds("s", "r", "u", "a"), "history": list(history)}


async def test_a_first_turn_question_is_classified_without_a_model_call(scripted_model):
    update = await query_understand(_state("hi there"), node_runtime())
    assert scripted_model.requests == []
    assert update["intent"] == "greeting" and update["rewrite_query"] == "hi there"
    assert update["system_prompt_override"]  # greetings answer with the intent prompt, without search


async def test_a_follow_up_still_goes_to_the_model(scripted_model):
    scripted_model.on(lambda b: True, Reply.text('{"rewrite_query": "How long does the battery last?", "intent": "kb_search"}'))
    update = await query_understand(_state("and the battery?", [HistoryTurn("r0", "Tell me about the sensor", "It is outdoors.")]), node_runtime())
    assert len(scripted_model.requests) == 1 and update["rewrite_query"] == "How long does the battery last?"


async def test_the_model_setting_keeps_the_rewrite_call_on_first_turns(scripted_model, monkeypatch):
    monkeypatch.setenv("RAGLINE_FIRST_TURN_INTENT", "model")
    get_settings.cache_clear()
    scripted_model.on(lambda b: True, Reply.text('{"rewrite_query": "hi there", "intent": "greeting"}'))
    await query_understand(_state("hi there"), node_runtime())
    assert len(scripted_model.requests) == 1
