"""End to end at package level: results -> model context -> streamed answer -> kb tags."""

from __future__ import annotations

import re

from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import HumanMessage, SystemMessage

from ragline.citations import Registry

ANSWER = (
    'Reset it with the "Forgot password" link <ref id="c1"/>. '
    "Install first <ref id='c2' /> (see ![diagram](res://0001)), "
    'refunds take 30 days <ref id="c3"></ref>, v2 is out <ref id="w1"/>'
    ' and the moon is cheese <ref id="c7"/>.'
)
# The same answer as a provider might stream it: tags and the alias cut mid-way.
SCRIPTED_CHUNKS = [
    'Reset it with the "Forgot password" link <r',
    'ef id="c',
    '1"/>. Install first <ref id=',
    "'c2' /> (see ![diagram](res://00",
    '01)), refunds take 30 days <ref id="c3"><',
    '/ref>, v2 is out <ref id="w1"/> and the moon is cheese <ref id="c7',
    '"/>.',
]


def kb_chunk_ids(text: str) -> list[str]:
    return re.findall(r'<kb chunk_id="([^"]+)"', text)


def prepared_registry(results) -> tuple[Registry, list]:
    registry = Registry()
    contexts = registry.render_context(results, faq_priority=True, faq_direct_answer_threshold=0.9)
    messages = registry.prepare_messages(
        [SystemMessage(content="Answer from the sources."), HumanMessage(content=f"{contexts}\n\nHow do I reset and install?")]
    )
    return registry, messages


def test_streamed_answer_kb_tags_point_at_the_right_chunks(results, ids):
    registry, messages = prepared_registry(results)
    # FAQ priority: the FAQ is c1, then the guide and the policy; the web page is w1.
    assert re.findall(r'<result id="(c\d)"[^>]*title="([^"]*)"', messages[1].content) == [
        ("c1", "How do I reset my password?"),
        ("c2", "Install guide"),
        ("c3", "Refund policy"),
    ]
    decoder = registry.stream_decoder()
    shown = [decoder.feed(chunk) for chunk in SCRIPTED_CHUNKS]
    decoded = "".join(shown) + decoder.flush()

    assert kb_chunk_ids(decoded) == [ids.faq_chunk, ids.guide_chunk, ids.policy_chunk]
    assert f'<web url="{ids.web_url}" title="Release notes"/>' in decoded
    assert "![diagram](minio://docs/install.png)" in decoded
    assert "<r" not in decoded and "c7" not in decoded and "res://" not in decoded
    assert decoded.endswith("and the moon is cheese .")
    assert decoded == registry.expand_text(ANSWER)


def test_character_by_character_model_stream_decodes_like_the_full_response(results, ids):
    registry, messages = prepared_registry(results)
    model = FakeListChatModel(responses=[ANSWER])
    answer_decoder = registry.stream_decoder()
    decoded = "".join(answer_decoder.feed(chunk.text) for chunk in model.stream(messages)) + answer_decoder.flush()
    assert decoded == registry.decode_message(model.invoke(messages)).content
    assert kb_chunk_ids(decoded) == [ids.faq_chunk, ids.guide_chunk, ids.policy_chunk]


async def test_stream_cancelled_mid_tag_loses_nothing_that_was_text(results):
    registry, messages = prepared_registry(results)
    model = FakeListChatModel(responses=[ANSWER])
    stop_after = ANSWER.index("<ref id='c2'") + len("<ref i")  # the user presses stop mid-tag
    decoder = registry.stream_decoder()
    shown, consumed = [], 0
    async for chunk in model.astream(messages):
        shown.append(decoder.feed(chunk.text))
        consumed += len(chunk.text)
        if consumed == stop_after:
            break
    assert decoder.pending == "<ref i"
    shown.append(decoder.flush())
    assert "".join(shown) == registry.expand_text(ANSWER[:stop_after])
    assert "".join(shown).endswith(". Install first ")
