"""Truncation detection of a finished answer (seed: chat_completion_stream.go), and the cited
answer of the generation stage: model refs expanded, uncited sentences attributed, streamed or not."""

import re

from hypothesis import given
from hypothesis import strategies as st

from ragline.citations.links import IMAGE_REMOVED
from ragline.citations.tags import UNSUPPORTED_MARK
from ragline.contracts.context import RunContext, RunHost
from ragline.contracts.events import ResponseType
from ragline.contracts.request import PipelineRequest
from ragline.contracts.state import TurnIds
from ragline.generation.answer import answer_turn, is_truncation
from ragline.services import Services
from tests.nodes.results import hit
from tests.scripted_model import Reply

TRUNCATION_REASONS = ["length", "max_tokens", "max_output_tokens"]


def test_truncation_reasons_count_whatever_their_case():
    assert is_truncation("LENGTH")
    assert is_truncation("Max_Tokens")
    assert is_truncation("max_output_tokens")


def test_a_normal_stop_or_no_reason_is_not_truncation():
    assert not is_truncation("stop")
    assert not is_truncation("STOP")
    assert not is_truncation(None)
    assert not is_truncation("")


@given(st.sampled_from(TRUNCATION_REASONS), st.data())
def test_any_casing_of_a_truncation_reason_is_truncation(reason, data):
    upper = data.draw(st.lists(st.booleans(), min_size=len(reason), max_size=len(reason)))
    assert is_truncation("".join(c.upper() if u else c for c, u in zip(reason, upper)))


@given(st.text(max_size=20))
def test_any_other_reason_is_not_truncation(reason):
    assert is_truncation(reason) == (reason.lower() in TRUNCATION_REASONS)


# --- attribution in the generation stage ---

SETUP = hit("setup-chunk", "Pairing takes up to three minutes. The console keeps the pairing after a power cut.",
            knowledge_id="setup-doc", knowledge_title="setup")
WARRANTY = hit("warranty-chunk", "Northwind Instruments gives a two-year warranty on the Aurora console and outdoor "
               "sensor from the date of purchase. Batteries and damage from lightning are not covered.",
               knowledge_id="warranty-doc", knowledge_title="warranty")
SECRET = hit("secret-chunk", "The service code of the console resets after ten failed attempts.", knowledge_id="secret-doc")


async def _answer(embedder, *, stream: bool) -> tuple[str, str]:
    """The streamed answer text (all answer events) and the stored response of one generation stage."""
    sent: list = []
    services = Services(embedder_factory=lambda: embedder)
    state = {"request": PipelineRequest(query="How long does pairing take?"), "turn": TurnIds("s", "r", "u", "a"),
             "merge_results": [SETUP, WARRANTY]}
    update = await answer_turn(state, services.chat(), RunContext(host=RunHost(services=services, event_sink=sent.append)), stream=stream)
    return "".join(e.content for e in sent if e.response_type == ResponseType.ANSWER), update["chat_response"].content


async def test_uncited_sentences_are_attributed_and_the_streamed_answer_equals_the_one_call_answer(scripted_model, embedder):
    scripted_model.on(lambda body: True, Reply.text(
        'Pairing takes up to three minutes <ref id="c1"/>. The warranty lasts two years from the date of purchase. '
        f'It is like <kb chunk_id="{SECRET.id}"/> {SECRET.content} I hope this helps.'
    ))
    streamed, stored = await _answer(embedder, stream=True)
    whole, stored_whole = await _answer(embedder, stream=False)
    assert streamed == stored == whole == stored_whole
    tags = [t for t in re.findall(r"<kb [^>]*/>", whole) if t != UNSUPPORTED_MARK]
    assert [re.search(r'chunk_id="([^"]+)"', t).group(1) for t in tags] == ["setup-chunk", "warranty-chunk"]
    # the secret passage was never given: its sentence is marked as supported by none, not cited
    assert whole.endswith(f"{SECRET.content}{UNSUPPORTED_MARK} I hope this helps.")
    assert 'attributed="true"' not in tags[0]  # the model's own citation, as the decoder expanded it
    assert whole.startswith("Pairing takes up to three minutes <kb ")
    assert f'from the date of purchase.{tags[1]} It is like ' in whole and tags[1].endswith(' attributed="true"/>')


async def _reviewed(embedder, query: str) -> tuple[list, dict]:
    """The events and the update of one streamed generation stage over the setup and warranty passages."""
    sent: list = []
    services = Services(embedder_factory=lambda: embedder)
    state = {"request": PipelineRequest(query=query), "turn": TurnIds("s", "r", "u", "a"), "merge_results": [SETUP, WARRANTY]}
    update = await answer_turn(state, services.chat(), RunContext(host=RunHost(services=services, event_sink=sent.append)), stream=True)
    return [e for e in sent if e.response_type == ResponseType.ANSWER], update


async def test_a_sentence_the_passages_contradict_is_replaced_by_their_words_after_the_stream(scripted_model, embedder):
    scripted_model.on(lambda body: True, Reply.text("Yes, batteries are covered by the warranty."))
    answers, update = await _reviewed(embedder, "Are batteries covered by the warranty?")
    assert "".join(e.content for e in answers if not (e.data or {}).get("replace")).startswith("Yes, batteries are covered")
    replaced = [e for e in answers if (e.data or {}).get("replace")]
    stored = update["chat_response"].content
    assert [e.content for e in replaced] == [stored]  # one replace, carrying the whole kept answer
    assert stored.startswith("The sources say: “Batteries and damage from lightning are not covered.”<kb chunk_id=\"warranty-chunk\"")
    assert update["messages"][0].content == stored


async def test_an_answer_with_nothing_grounded_and_a_made_up_price_ends_in_the_fallback(scripted_model, embedder):
    scripted_model.on(lambda body: True, Reply.text("The Aurora weather station costs 150 dollars in most shops."))
    answers, update = await _reviewed(embedder, "What does the Aurora weather station cost?")
    response = update["chat_response"]
    assert response.fallback and "could not find" in response.content
    assert answers[-1].data == {"replace": True} and answers[-1].content == response.content


def test_without_a_requested_temperature_a_remote_model_gets_the_seeds_and_a_local_one_answers_greedily():
    from ragline import defaults
    from ragline.contracts.request import PipelineRequest
    from ragline.generation.answer import chat_options

    unset = PipelineRequest(query="q")
    assert chat_options(unset).temperature == defaults.ANSWER_TEMPERATURE == 0.3
    assert chat_options(unset, local=True).temperature == defaults.LOCAL_ANSWER_TEMPERATURE == 0.0
    chosen = PipelineRequest(query="q", summary={"temperature": 0.7})
    assert chat_options(chosen).temperature == chat_options(chosen, local=True).temperature == 0.7
    # the rule survives a checkpoint round trip: an unset temperature stays unset
    assert chat_options(PipelineRequest.model_validate(unset.model_dump()), local=True).temperature == 0.0


def test_a_local_answer_is_capped_unless_the_request_sets_its_own_limit():
    from ragline import defaults
    from ragline.contracts.request import PipelineRequest
    from ragline.generation.answer import chat_options

    unset = PipelineRequest(query="q")
    assert chat_options(unset, local=True).max_tokens == defaults.LOCAL_ANSWER_MAX_TOKENS == 512
    assert chat_options(unset).max_tokens is None  # a remote provider keeps its own default
    chosen = PipelineRequest(query="q", summary={"max_tokens": 2000})
    assert chat_options(chosen, local=True).max_tokens == chat_options(chosen).max_tokens == 2000


async def test_an_answer_without_sources_loses_a_foreign_image_and_keeps_its_links(scripted_model, embedder):
    """No passage to check links against, but a client of the OpenAI-compatible or MCP door would still
    load a Markdown image, and its URL can carry the question to its host."""
    scripted_model.on(lambda body: True, Reply.text("Here: ![chart](https://pixel.example/t.gif?q=my+question) and https://docs.example/a."))
    services = Services(embedder_factory=lambda: embedder)
    for stream in (True, False):
        sent: list = []
        state = {"request": PipelineRequest(query="Draw me a chart"), "turn": TurnIds("s", "r", "u", "a")}
        update = await answer_turn(state, services.chat(), RunContext(host=RunHost(services=services, event_sink=sent.append)), stream=stream)
        shown = "".join(e.content for e in sent if e.response_type == ResponseType.ANSWER)
        assert shown == update["chat_response"].content == f"Here: {IMAGE_REMOVED} and https://docs.example/a."
