"""Text-only traversal of message contents and tool arguments."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage

from ragline.citations.messages import (
    map_content,
    map_message_text,
    map_strings,
    message_text,
)

IMAGE = {"type": "image_url", "image_url": {"url": "minio://b/a.png"}}


def test_only_text_parts_of_a_multimodal_message_are_rewritten():
    content = ["plain", {"type": "text", "text": "part"}, IMAGE]
    assert map_content(content, str.upper) == ["PLAIN", {"type": "text", "text": "PART"}, IMAGE]






def test_map_strings_passes_the_nearest_key_and_keeps_other_values():
    seen: list[tuple[str, str | None]] = []

    def record(value: str, key: str | None) -> str:
        seen.append((value, key))
        return value.upper()

    args = {"query": "q", "chunk_ids": ["a", "b"], "limit": 3, "nested": {"url": "u"}}
    assert map_strings(args, record) == {"query": "Q", "chunk_ids": ["A", "B"], "limit": 3, "nested": {"url": "U"}}
    assert seen == [("q", "query"), ("a", "chunk_ids"), ("b", "chunk_ids"), ("u", "url")]


def test_reasoning_text_is_rewritten_with_the_content():
    message = AIMessage(content="a", additional_kwargs={"reasoning_content": "b", "other": 1})
    mapped = map_message_text(message, str.upper)
    assert mapped.content == "A" and mapped.additional_kwargs == {"reasoning_content": "B", "other": 1}
    assert message.content == "a"


def test_messages_without_reasoning_keep_their_kwargs():
    message = HumanMessage(content="a")
    assert map_message_text(message, str.upper).additional_kwargs == {}


def test_message_text_is_the_string_or_the_text_parts_joined():
    assert message_text(HumanMessage(content="plain")) == "plain"
    parts = [{"type": "text", "text": "What is "}, {"type": "image_url", "image_url": {"url": "data:,"}}, {"type": "text", "text": "this?"}]
    assert message_text(HumanMessage(content=parts)) == "What is this?"
    assert message_text(AIMessage(content=[])) == ""
