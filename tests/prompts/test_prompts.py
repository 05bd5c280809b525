import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragline import prompts

SEED_TEMPLATE_IDS = {"rewrite", "intent_prompts", "system_prompt", "context_template", "fallback", "generate_session_title",
                     "keywords_extraction", "graph_extraction", "generate_questions", "generate_summary"}


def test_every_seed_template_file_ships_and_loads():
    assert set(prompts.TEMPLATE_FILES) == SEED_TEMPLATE_IDS | {"agent", "quoted_context"}  # agent.yaml: the seed's agent_system_prompt and the loop's notes; quoted_context.yaml: its QuotedContext block
    for name in prompts.TEMPLATE_FILES:
        assert prompts.load(name)


def test_intent_prompt_ids_are_intent_values():
    from ragline.contracts.state import QueryIntent

    assert {t.id for t in prompts.load("intent_prompts")} <= set(QueryIntent._value2member_map_)


def test_rewrite_template_has_the_seed_placeholders():
    template = prompts.get("rewrite")
    assert "{conversation}" in template.text("user") and "{query}" in template.text("user")


def test_render_fills_known_placeholders_and_keeps_json_braces():
    assert prompts.render('{"a": 1} {query} {unknown}', query="Q") == '{"a": 1} Q {unknown}'


@given(st.text(alphabet=st.characters(blacklist_characters="{}")))
def test_render_never_changes_text_without_placeholders(text):
    assert prompts.render(text, query="x") == text


def test_unknown_file_and_id_raise_a_clear_error():
    with pytest.raises(prompts.PromptError):
        prompts.load("nope")
    with pytest.raises(prompts.PromptError):
        prompts.get("fallback", "nope")


def test_the_agent_loop_has_its_system_prompt_compaction_and_limit_notes():
    ids = {t.id for t in prompts.load("agent")}
    assert ids == {"system", "compact", "max_rounds", "max_tool_calls", "answer_now", "images_note"}
    assert prompts.get("agent").id == "system"
    assert "{question}" in prompts.get("agent", "compact").text() and "{rounds}" in prompts.get("agent", "compact").text()
