"""Registry: one per answer; fixed codec order; messages, tool calls and responses."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from ragline.citations import Registry
from ragline.citations.protocol import protocol_prompt

SLUG_KNOWLEDGE_ID = "5d1c2b3a-aaaa-4bbb-8ccc-dddd00001111"


def test_wiki_summary_slug_is_aliased_before_its_knowledge_id(results):
    registry = Registry()
    registry.render_context(results)  # registers SLUG_KNOWLEDGE_ID as d1
    encoded = registry.encode_text(f"[[summary/{SLUG_KNOWLEDGE_ID}|Guide]] and {SLUG_KNOWLEDGE_ID}")
    assert encoded == "[[res://0002|Guide]] and d1"
    assert registry.decode_tool_arguments({"slug": "res://0002"}) == {"slug": f"summary/{SLUG_KNOWLEDGE_ID}"}


def test_prepare_messages_appends_the_protocol_and_leaves_the_callers_messages_alone(results):
    registry = Registry()
    contexts = registry.render_context(results)
    messages = [
        SystemMessage(content="You answer from the knowledge base."),
        HumanMessage(content=f"Contexts:\n{contexts}\nQuestion: how do I install?"),
    ]
    prepared = registry.prepare_messages(messages)
    assert prepared[0].content == "You answer from the knowledge base." + protocol_prompt(True)
    assert prepared[1].content.startswith('Contexts:\n<search_results>\n<result id="c1"')
    assert messages[0].content == "You answer from the knowledge base."  # the caller's messages are untouched


def test_without_a_system_prompt_the_protocol_becomes_one():
    prepared = Registry().prepare_messages([HumanMessage(content="how?")])
    assert isinstance(prepared[0], SystemMessage) and prepared[0].content.startswith("## Source handling")
    assert prepared[1].content == "how?"


def test_a_registry_rebuilt_with_register_context_decodes_what_the_rendering_registry_issued(results, ids):
    rendering = Registry()
    contexts = rendering.render_context(results, faq_priority=True)
    rebuilt = Registry()
    rebuilt.register_context(results, faq_priority=True)
    assert rebuilt.encode_text(contexts) == rendering.encode_text(contexts)
    answer = 'Reset <ref id="c1"/>, install <ref id="c2"/> from <ref id="d1"/>.'
    assert rebuilt.expand_text(answer) == rendering.expand_text(answer)
    assert ids.faq_chunk in rebuilt.expand_text(answer)


def test_citations_off_still_render_results_but_forbid_and_strip_citations(results):
    registry = Registry(citations_enabled=False)
    contexts = registry.render_context(results)
    prepared = registry.prepare_messages([SystemMessage(content="S"), HumanMessage(content=contexts + "\nq")])
    assert "Citations are OFF" in prepared[0].content and '<result id="c1"' in prepared[1].content
    assert registry.expand_text('Yes <ref id="c1"/>, <kb chunk_id="x"/>done.') == "Yes , done."


def test_replayed_answers_fold_kb_tags_into_refs_that_are_not_citable(ids):
    registry = Registry()
    history = AIMessage(content=f'Earlier: <kb chunk_id="{ids.policy_chunk}" title="Refund policy"/>.')
    encoded = registry.encode_messages([HumanMessage(content=f"about {ids.policy_chunk}?"), history])
    assert encoded[0].content == "about c1?"
    assert encoded[1].content == 'Earlier: <ref id="c1"/>.'
    # Seen only in history: addressable, but it backs no claim of this answer.
    assert registry.expand_text('Refunds <ref id="c1"/>.') == "Refunds ."


def test_a_history_source_becomes_citable_once_this_answer_retrieves_it(results, ids, expected_tags):
    registry = Registry()
    registry.encode_messages([AIMessage(content=f'<kb chunk_id="{ids.policy_chunk}"/>')])
    registry.render_context(results)
    assert registry.expand_text('<ref id="c1"/>') == expected_tags["c2"].replace("c2", "c1")
    assert registry.sources.durable_for("c1", "chunk") == ids.policy_chunk


def test_tool_results_and_call_arguments_in_history_are_encoded(results, ids):
    registry = Registry()
    registry.render_context(results)
    call = AIMessage(
        content="", tool_calls=[{"name": "read", "args": {"chunk_id": ids.guide_chunk, "n": 1}, "id": "t1"}]
    )
    tool = ToolMessage(content="file minio://docs/install.png", tool_call_id="t1")
    encoded = registry.encode_messages([call, tool])
    assert encoded[0].tool_calls[0]["args"] == {"chunk_id": "c1", "n": 1}
    assert encoded[1].content == "file res://0001"


def test_tool_call_arguments_get_real_ids_back_only_under_declared_keys(registry, ids):
    calls = [
        {
            "name": "read_chunks",
            "args": {"chunk_ids": ["c1", "c3"], "knowledge_base_id": "b1", "query": "c1 vs c2", "url": "w1"},
            "id": "t1",
            "type": "tool_call",
        }
    ]
    (decoded,) = registry.decode_tool_calls(calls)
    assert decoded["args"] == {
        "chunk_ids": [ids.guide_chunk, ids.faq_chunk],
        "knowledge_base_id": ids.knowledge_base,
        "query": "c1 vs c2",
        "url": ids.web_url,
    }
    assert calls[0]["args"]["chunk_ids"] == ["c1", "c3"]


def test_unknown_handles_in_tool_arguments_are_reported_for_rejection(registry):
    decoded = registry.decode_tool_arguments({"chunk_id": "c9", "image": "res://0001 res://0077", "kb_id": "w1"})
    assert decoded["image"] == "minio://docs/install.png res://0077"
    assert registry.unresolved_handles(decoded) == ["c9", "res://0077", "w1"]


def test_non_streaming_response_decodes_in_one_call(registry, ids, expected_tags):
    response = AIMessage(
        content='Use the link <ref id="c3"/>. ![d](res://0001)',
        additional_kwargs={"reasoning_content": 'c3 answers it <ref id="c3"/>'},
        tool_calls=[{"name": "open", "args": {"chunk_id": "c3"}, "id": "t1"}],
    )
    decoded = registry.decode_message(response)
    assert decoded.content == f"Use the link {expected_tags['c3']}. ![d](minio://docs/install.png)"
    assert decoded.additional_kwargs["reasoning_content"] == f"c3 answers it {expected_tags['c3']}"
    assert decoded.tool_calls[0]["args"] == {"chunk_id": ids.faq_chunk}


def test_registries_of_different_answers_share_nothing(results):
    first, second = Registry(), Registry()
    first.render_context(results)
    assert second.expand_text('<ref id="c1"/> res://0001') == " "


def test_protocol_is_added_as_a_text_part_to_a_multimodal_system_prompt():
    system = SystemMessage(content=[{"type": "text", "text": "S"}])
    prepared = Registry().prepare_messages([system, HumanMessage(content="q")])
    assert prepared[0].content == [{"type": "text", "text": "S"}, {"type": "text", "text": protocol_prompt(True)}]
    assert len(prepared) == 2


def test_attribution_finds_the_alias_of_a_given_result_and_tags_only_this_answers_evidence(registry, results, expected_tags):
    assert [registry.citable_alias(r) for r in results] == ["c1", "c2", "c3", "w1"]
    assert registry.attributed_tag("c2") == expected_tags["c2"].replace("/>", ' attributed="true"/>')
    assert registry.attributed_tag("w1") == expected_tags["w1"].replace("/>", ' attributed="true"/>')
    assert registry.attributed_tag("c9") == registry.attributed_tag("d1") == ""


def test_a_result_seen_only_in_history_or_never_registered_has_no_alias_to_attribute(results, ids):
    registry = Registry()
    history = [AIMessage(content=f'Before <kb chunk_id="{ids.guide_chunk}" title="Install guide"/>.')]
    registry.encode_messages(history)  # the guide is now addressable (c1), but not evidence
    assert registry.citable_alias(results[0]) == "" and registry.attributed_tag("c1") == ""
    assert registry.citable_alias(results[1]) == ""  # never registered at all


def test_with_citations_off_nothing_is_attributed(results):
    registry = Registry(citations_enabled=False)
    registry.render_context(results)
    assert registry.citable_alias(results[0]) == "c1" and registry.attributed_tag("c1") == ""


def test_small_models_get_no_citation_rules_only_the_off_switch():
    from ragline.citations import Registry

    assert '<ref id="cN"/>' in Registry().protocol_prompt()
    assert Registry(compact_protocol=True).append_protocol("Answer briefly.") == "Answer briefly."
    off = Registry(citations_enabled=False, compact_protocol=True).append_protocol("Answer briefly.")
    assert off.startswith("Answer briefly.") and "Do not write citations" in off
