import string
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from ragline.contracts.passages import SearchResult, SearchTarget, content_signature, merge_search_results
from ragline.contracts.request import PipelineRequest
from ragline.contracts.state import QueryIntent, needs_kb_retrieval, needs_retrieval, normalize_intent


@dataclass
class Hit:
    id: str
    content: str


def test_request_is_immutable():
    request = PipelineRequest(query="q")
    with pytest.raises(ValidationError):
        request.query = "changed"  # type: ignore[misc]


def test_request_without_query_or_image_is_rejected():
    with pytest.raises(ValidationError, match="query or at least one image"):
        PipelineRequest(query="   ")


def test_request_accepts_image_only():
    assert PipelineRequest(images=[{"url": "data:image/png;base64,AAAA"}]).images


def test_request_rejects_unknown_fields():
    with pytest.raises(ValidationError):
        PipelineRequest(query="q", temprature=0.1)  # type: ignore[call-arg]


def test_every_request_field_has_a_description():
    missing = [name for name, f in PipelineRequest.model_fields.items() if not f.description]
    assert missing == []


def test_request_uses_knowledge_with_kb_or_web_search():
    assert not PipelineRequest(query="q").uses_knowledge
    assert PipelineRequest(query="q", knowledge_base_ids=["kb"]).uses_knowledge
    assert PipelineRequest(query="q", web_search_enabled=True).uses_knowledge
    assert PipelineRequest(query="q", search_targets=[SearchTarget(knowledge_base_id="kb")]).uses_knowledge


@pytest.mark.parametrize("raw,expected", [("KB-Search", "kb_search"), ("kb search", "kb_search"), (" Greeting ", "greeting"), ("weather", ""), (None, "")])
def test_intent_is_normalised_and_unknown_labels_become_empty(raw, expected):
    assert normalize_intent(raw) == expected


@given(st.text())
def test_normalised_intent_is_always_known_or_empty(raw):
    assert normalize_intent(raw) in {"", *QueryIntent._value2member_map_}


def test_only_kb_clarification_summarize_and_empty_need_kb_retrieval():
    wanted = {intent.value for intent in QueryIntent if needs_kb_retrieval(intent.value)}
    assert wanted == {"kb_search", "clarification", "summarize"}
    assert needs_kb_retrieval("")


def test_web_search_intent_needs_retrieval_only_when_web_search_is_on():
    assert not needs_retrieval("web_search", PipelineRequest(query="q"))
    assert needs_retrieval("web_search", PipelineRequest(query="q", web_search_enabled=True))
    assert not needs_retrieval("greeting", PipelineRequest(query="q", web_search_enabled=True))


def test_search_results_are_deduplicated_by_chunk_id_and_content_signature():
    merged = merge_search_results([Hit("a", "Alpha text")], [Hit("a", "other"), Hit("b", "alpha   TEXT"), Hit("c", "gamma")])
    assert [h.id for h in merged] == ["a", "c"]


def _passage(chunk_id: str, content: str) -> SearchResult:
    return SearchResult(id=chunk_id, content=content, score=0.5, knowledge_id="d", knowledge_base_id="kb")


def test_search_result_reducer_keeps_the_first_occurrence_by_id_and_by_content():
    merged = merge_search_results([_passage("x", "one")], [_passage("y", "two"), _passage("x", "dup"), _passage("z", " ONE ")])
    assert [h.id for h in merged] == ["x", "y"]


@given(st.text(alphabet=string.ascii_letters, min_size=1), st.text(alphabet=string.ascii_letters, min_size=1))
def test_content_signature_ignores_case_and_whitespace_runs(a, b):
    assert content_signature(f"{a} {b}") == content_signature(f"  {a.upper()} \n  {b.lower()} ")


def test_agent_config_has_every_request_setting_but_the_question():
    from ragline.contracts.request import AgentConfig

    assert set(AgentConfig.model_fields) == set(PipelineRequest.model_fields) - {"query", "images", "quoted_context"}  # what each question sets itself
    assert all(f.description for f in AgentConfig.model_fields.values())


def test_request_settings_win_over_agent_defaults_and_unset_ones_inherit():
    from ragline.contracts.request import AgentConfig, effective_request

    agent = AgentConfig(rerank_top_k=9, citations_enabled=False)
    request = effective_request({"query": "q", "citations_enabled": True}, agent)
    assert (request.rerank_top_k, request.citations_enabled) == (9, True)
    assert effective_request(PipelineRequest(query="q"), {"rerank_top_k": 3}).rerank_top_k == 3


def test_a_new_turn_starts_every_result_key_empty_derived_from_the_state_types():
    """The reset lists follow the state's annotations: a key added to TurnResults or AgentState is reset without a hand-kept list."""
    from ragline.contracts.agent_state import AGENT_ACCUMULATING, AGENT_RESETS, AgentState
    from ragline.contracts.state import PER_TURN_ACCUMULATING, PER_TURN_RESET, TurnResults

    assert PER_TURN_RESET == {"rewrite_query": "", "intent": "", "image_description": "", "history": [], "search_targets": [],
                              "rerank_results": [], "merge_results": [], "entities": [], "entity_kb_ids": [], "graph_result": None,
                              "user_content": "", "rendered_contexts": "", "system_prompt_override": None, "memory_prompt": "",
                              "plain_reply": False, "chat_response": None, "error": None}
    assert PER_TURN_ACCUMULATING == ("search_results",)
    assert set(PER_TURN_RESET) | set(PER_TURN_ACCUMULATING) == set(TurnResults.__annotations__)
    assert AGENT_RESETS == {"pending_calls": [], "awaiting_approval": [], "denied": {}, "awaiting_authorization": [], "oauth_asked": [],
                            "oauth_declined": [], "rounds": 0, "tool_calls_made": 0, "limit": "", "answer_text": "", "answer_thinking": "",
                            "finish_reason": None}
    assert AGENT_ACCUMULATING == ("conversation", "sources", "tool_images")
    assert set(AGENT_RESETS) | set(AGENT_ACCUMULATING) == set(AgentState.__annotations__) - set(TurnResults.__annotations__) - {"request", "messages", "turn"}
