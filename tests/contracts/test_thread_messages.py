"""A thread message's facts: what a constructor writes, its reader reads back, also after a checkpoint."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from ragline.contracts import thread_messages
from ragline.contracts.passages import SearchResult

texts = st.text(max_size=40)
ids = st.text(alphabet="0123456789abcdef", min_size=1, max_size=32)
images = st.lists(st.fixed_dictionaries({"url": texts, "caption": texts}), max_size=3)


def _through_checkpoint(message):
    serde = JsonPlusSerializer()
    return serde.loads_typed(serde.dumps_typed(message))


@given(text=texts, id=ids, request_id=ids, shown=images)
def test_a_question_keeps_its_round_and_images_through_a_checkpoint(text, id, request_id, shown):
    message = _through_checkpoint(thread_messages.question(text, id=id, request_id=request_id, images=shown))
    assert isinstance(message, HumanMessage) and message.id == id and message.content == text
    assert thread_messages.request_id_of(message) == thread_messages.round_of(message) == request_id
    assert thread_messages.images_of(message) == shown
    assert not thread_messages.is_injected(message)


@given(text=texts, request_id=ids, stopped=st.booleans(), truncated=st.booleans())
def test_an_answer_keeps_its_flags_and_references(text, request_id, stopped, truncated):
    result = SearchResult(id="c1", content="passage", knowledge_id="k", knowledge_base_id="kb", score=0.5)
    message = _through_checkpoint(thread_messages.answer(text, id="a1", request_id=request_id, references=[result],
                                                         stopped=stopped, truncated=truncated))
    assert isinstance(message, AIMessage)
    assert thread_messages.is_stopped(message) is stopped and thread_messages.is_truncated(message) is truncated
    assert thread_messages.references_of(message) == [result.model_dump(mode="json")]
    assert thread_messages.request_id_of(message) == request_id


def test_metadata_cannot_overwrite_the_answers_own_facts():
    message = thread_messages.answer("x", id="a", request_id="r1", metadata={"request_id": "other", "assistant_id": "as1",
                                                                            "assistant_version": 3, "stopped": True})
    assert thread_messages.request_id_of(message) == "r1" and not thread_messages.is_stopped(message)
    assert thread_messages.assistant_of(message) == ("as1", 3)
    assert thread_messages.assistant_of(thread_messages.answer("x", id="b", request_id="r2")) == (None, None)


def test_an_injected_message_belongs_to_its_turns_round():
    message = thread_messages.injected_question("also this", id="u:injected:0", request_id="r1")
    assert thread_messages.is_injected(message)
    assert thread_messages.round_of(message) == "r1" and thread_messages.request_id_of(message) != "r1"


def test_images_in_the_older_shape_read_as_urls():
    message = HumanMessage(content="q", additional_kwargs={"images": ["http://x/1.png", {"url": "http://x/2.png"}]})
    assert thread_messages.images_of(message) == [{"url": "http://x/1.png"}, {"url": "http://x/2.png"}]
    assert thread_messages.images_of(HumanMessage(content="q")) == []
    assert thread_messages.request_id_of(HumanMessage(content="q")) == ""


def test_with_fields_keeps_the_id_so_an_update_replaces_the_message():
    original = thread_messages.question("q", id="u1", request_id="r1", images=[{"url": "u", "caption": ""}])
    captioned = thread_messages.with_fields(original, **{thread_messages.IMAGES: [{"url": "u", "caption": "a dog"}]})
    assert captioned.id == "u1" and captioned.content == "q" and thread_messages.request_id_of(captioned) == "r1"
    assert thread_messages.images_of(captioned)[0]["caption"] == "a dog"
    assert thread_messages.images_of(original)[0]["caption"] == ""


def test_stream_chunks_carry_citations_and_thinking_where_langchain_reads_them():
    chunk = thread_messages.answer_chunk("text", id="a1", citations=[{"chunk_id": "c1"}])
    assert chunk.additional_kwargs == {"citations": [{"chunk_id": "c1"}]}
    assert thread_messages.answer_chunk("text", id="a1").additional_kwargs == {}
    assert thread_messages.thinking_chunk("hmm", id="a1").additional_kwargs == {"reasoning_content": "hmm"}
