import json

from hypothesis import given
from hypothesis import strategies as st

from ragline.generation.understanding import parse_understanding


def test_plain_json_is_parsed():
    result = parse_understanding('{"rewrite_query": "capital of France", "intent": "kb_search"}', "q")
    assert (result.rewrite_query, result.intent) == ("capital of France", "kb_search")


def test_markdown_fence_and_prose_are_tolerated():
    output = 'Sure! Here it is:\n```json\n{"rewrite_query": "x", "intent": "Greeting"}\n```\nHope it helps.'
    assert parse_understanding(output, "q").intent == "greeting"


def test_field_aliases_are_accepted():
    result = parse_understanding('{"rewritten_query": "y", "intention": "KB-Search"}', "q")
    assert (result.rewrite_query, result.intent) == ("y", "kb_search")


def test_ocr_fields_merge_into_the_image_description():
    result = parse_understanding('{"rewrite_query": "y", "intent": "image_only", "image_description": "a receipt", "ocr_text": "TOTAL 42"}', "q")
    assert result.image_description == "a receipt\nTOTAL 42"


def test_output_cut_by_the_token_limit_keeps_the_fields_already_written():
    output = '{"rewrite_query": "what is the refund policy", "intent": "kb_search", "image_description": "a screenshot showing the ref'
    result = parse_understanding(output, "q")
    assert result.rewrite_query == "what is the refund policy"
    assert result.intent == "kb_search"
    assert result.image_description == "a screenshot showing the ref"


def test_a_cut_rewrite_is_not_trusted():
    result = parse_understanding('{"rewrite_query": "what is the ref', "original question")
    assert result.rewrite_query == "original question"


def test_unparseable_output_keeps_the_original_query_and_empty_intent():
    result = parse_understanding("I cannot help with that.", "original question")
    assert (result.rewrite_query, result.intent, result.parsed) == ("original question", "", False)


def test_unknown_intent_becomes_empty():
    assert parse_understanding('{"rewrite_query": "x", "intent": "weather"}', "q").intent == ""


@given(st.text(max_size=200), st.text(min_size=1, max_size=50))
def test_parser_never_raises_and_always_returns_a_query(output, query):
    result = parse_understanding(output, query)
    assert result.rewrite_query.strip() or result.rewrite_query == query


@given(st.text(min_size=1, max_size=80).filter(str.strip), st.sampled_from(["kb_search", "greeting", "summarize"]), st.integers(0, 40))
def test_any_json_answer_round_trips_even_inside_prose(rewrite, intent, pad):
    output = "x" * pad + json.dumps({"rewrite_query": rewrite, "intent": intent}, ensure_ascii=False) + " trailing"
    result = parse_understanding(output, "q")
    assert (result.rewrite_query, result.intent) == (rewrite.strip(), intent)
