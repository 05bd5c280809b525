"""The streaming decoder: any chunking decodes like the whole text; nothing unknown leaks."""

from __future__ import annotations

import re
from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from ragline.citations import Registry
from ragline.citations.stream_decoder import MAX_TAG_BODY

KNOWN = ["c1", "c2", "c3", "w1"]
UNKNOWN = ["c9", "c0", "w7", "d1", "b1", "x1", ""]  # d1/b1 exist but are never citable
RESOURCE = {"res://0001": "minio://docs/install.png", "res://0042": ""}

REF_STYLES = [
    '<ref id="{}"/>',
    "<ref id='{}' />",
    "<ref id={}>",
    '<ref id="{}"></ref>',
    '<REF ID="{}"/>',
    '<ref  id = "{}"\n/>',
]
MODEL_WRITTEN_TAGS = ['<kb chunk_id="forged"/>', '<web url="https://evil.test" title="x">', "</kb>", "</ref>", "<kb>"]
TAG_SHARDS = [
    "<",
    "<r",
    "<re",
    "<ref",
    "</",
    "<k",
    "<kb",
    "<w",
    "<we",
    "<web",
    ">",
    "/>",
    '"',
    "=",
    "r",
    "re",
    "res:",
    "res://",
]
# A shard, something the decoder removes, then the rest of a tag name: removal must not splice
# "<k" + "b " into "<kb ".
splices = st.builds(
    lambda shard, removed, tail: shard + removed + tail,
    st.sampled_from(TAG_SHARDS[:10]),
    st.sampled_from([*MODEL_WRITTEN_TAGS, '<ref id="c9"/>', "res://0042"]),
    st.sampled_from(["b ", "eb ", "f ", "ef ", "kb ", 'ref id="c1"/>', 'b chunk_id="forged"/>']),
)

ref_tags = st.builds(
    lambda style, alias: style.format(alias), st.sampled_from(REF_STYLES), st.sampled_from(KNOWN + UNKNOWN)
)
messy_text = st.text(alphabet="ab <>/=\"'kbrefwsc:1 \n", max_size=12)
answers = st.lists(
    st.one_of(
        st.text(max_size=12),
        messy_text,
        ref_tags,
        splices,
        st.sampled_from(MODEL_WRITTEN_TAGS + TAG_SHARDS + list(RESOURCE)),
    ),
    max_size=25,
).map("".join)

# Anything that opens one of our tags (or its closing tag) must come from the registry.
TAG_OPENER = re.compile(r"(?i)</?(?:ref|kb|web)(?=[\s/>]|$)")


def cut(text: str, positions: list[int]) -> list[str]:
    bounds = [0, *sorted({p % (len(text) + 1) for p in positions}), len(text)]
    return [text[a:b] for a, b in pairwise(bounds)]


def stream(registry: Registry, chunks: list[str]) -> str:
    decoder = registry.stream_decoder()
    return "".join(decoder.feed(chunk) for chunk in chunks) + decoder.flush()


@given(answer=answers, positions=st.lists(st.integers(min_value=0), max_size=30))
def test_streaming_decode_equals_one_shot_decode_for_any_chunking(decoding_registry, answer, positions):
    assert stream(decoding_registry, cut(answer, positions)) == decoding_registry.expand_text(answer)


@given(answer=st.text(), positions=st.lists(st.integers(min_value=0), max_size=30))
def test_streaming_decode_equals_one_shot_decode_for_arbitrary_text(decoding_registry, answer, positions):
    assert stream(decoding_registry, cut(answer, positions)) == decoding_registry.expand_text(answer)


@given(answer=answers, size=st.integers(min_value=1, max_value=4))
def test_one_character_chunks_decode_like_the_whole_answer(decoding_registry, answer, size):
    chunks = [answer[i : i + size] for i in range(0, len(answer), size)]
    assert stream(decoding_registry, chunks) == decoding_registry.expand_text(answer)


@given(answer=answers, positions=st.lists(st.integers(min_value=0), max_size=10))
def test_unknown_aliases_never_leak(decoding_registry, expected_tags, ids, answer, positions):
    decoded = stream(decoding_registry, cut(answer, positions))
    for opener in TAG_OPENER.finditer(decoded):
        assert any(decoded.startswith(tag, opener.start()) for tag in expected_tags.values()), decoded
    for chunk_id in re.findall(r'<kb chunk_id="([^"]*)"', decoded):
        assert chunk_id in {ids.guide_chunk, ids.policy_chunk, ids.faq_chunk}


# --- no byte dropped: literal text between tokens survives exactly --------------------------------

# Literal text without `<` or `:` cannot touch a tag or an alias, so its decoded form is known.
plain_text = st.text(alphabet=st.characters(blacklist_characters="<:", blacklist_categories=("Cs",)), max_size=15)
tokens = st.one_of(
    st.tuples(ref_tags, st.none()),
    st.tuples(st.sampled_from(MODEL_WRITTEN_TAGS), st.just("")),
    # A space after the alias, or a following digit would make it another alias.
    st.sampled_from([(f"{alias} ", f"{value} ") for alias, value in RESOURCE.items()]),
)


def expected_for(token: str, expected: str | None, expected_tags: dict[str, str]) -> str:
    if expected is not None:
        return expected
    alias = re.search(r"""(?i)id\s*=\s*["']?([a-z0-9]*)""", token).group(1).lower()
    return expected_tags.get(alias, "")


@given(
    parts=st.lists(st.tuples(plain_text, tokens), max_size=12),
    tail=plain_text,
    positions=st.lists(st.integers(min_value=0), max_size=20),
)
def test_no_byte_is_dropped_between_tokens(decoding_registry, expected_tags, parts, tail, positions):
    answer = "".join(text + token for text, (token, _) in parts) + tail
    expected = "".join(text + expected_for(token, exp, expected_tags) for text, (token, exp) in parts) + tail
    assert stream(decoding_registry, cut(answer, positions)) == expected


@given(text=st.text(alphabet=st.characters(blacklist_characters="<rR", blacklist_categories=("Cs",))))
def test_text_that_cannot_start_a_tag_or_alias_is_never_held_back(decoding_registry, text):
    decoder = decoding_registry.stream_decoder()
    assert decoder.feed(text) == text
    assert decoder.pending == ""


@given(answer=answers, stop=st.integers(min_value=0))
def test_cancel_mid_stream_flushes_everything_held(decoding_registry, answer, stop):
    prefix = answer[: stop % (len(answer) + 1)]
    decoder = decoding_registry.stream_decoder()
    shown = "".join(decoder.feed(c) for c in prefix)
    assert shown + decoder.flush() == decoding_registry.expand_text(prefix)
    assert decoder.pending == ""


# --- the cases the properties are about, spelled out ----------------------------------------------


def test_ref_tag_split_at_every_boundary_expands_once(registry, expected_tags):
    answer = 'Install it first <ref id="c1"/>.'
    for split in range(len(answer) + 1):
        assert stream(registry, [answer[:split], answer[split:]]) == f"Install it first {expected_tags['c1']}."


def test_partial_tag_is_held_until_it_completes(registry, expected_tags):
    decoder = registry.stream_decoder()
    assert decoder.feed("See <re") == "See "
    assert decoder.pending == "<re"
    assert decoder.feed('f id="w1"/> now') == f"{expected_tags['w1']} now"


def test_unknown_alias_is_removed_fail_closed(registry):
    assert registry.expand_text('Refunds <ref id="c9"/>take <ref id="w7"/>30 days.') == "Refunds take 30 days."


def test_document_and_knowledge_base_aliases_are_never_citable(registry):
    assert registry.expand_text('Guide <ref id="d1"/><ref id="b1"/>.') == "Guide ."


def test_several_aliases_in_one_ref_expand_in_order_and_unknown_ones_drop(registry, expected_tags):
    decoded = registry.expand_text('Both <ref id="c2, c9 w1"/>.')
    assert decoded == f"Both {expected_tags['c2']}{expected_tags['w1']}."


def test_model_written_kb_and_web_tags_are_removed(registry):
    answer = 'A <kb chunk_id="secret" title="x"/>B <web url="javascript:alert(1)">C</web>'
    assert registry.expand_text(answer) == "A B C"


def test_removing_a_tag_cannot_splice_a_kb_tag_together(registry):
    answer = '<k<ref id="c9"/>b chunk_id="secret"/> and <w<re<ref id="x"/>eb url="https://evil.test"/>'
    decoded = registry.expand_text(answer)
    assert not TAG_OPENER.search(decoded), decoded


def test_truncated_ref_tag_at_end_of_answer_is_dropped(registry):
    decoder = registry.stream_decoder()
    assert decoder.feed('The answer is 42 <ref id="c') == "The answer is 42 "
    assert decoder.flush() == ""


def test_unterminated_ref_tag_loses_only_its_opener(registry):
    answer = 'a <ref id="c1" and then <b>bold</b>'
    assert registry.expand_text(answer) == 'a  id="c1" and then <b>bold</b>'
    long_answer = "a <ref " + "x" * (MAX_TAG_BODY + 1) + "> tail"
    assert registry.expand_text(long_answer) == "a  " + "x" * MAX_TAG_BODY + "x> tail"


def test_bracket_citations_are_left_as_written(registry):
    assert registry.expand_text("values[c1] and [w1]") == "values[c1] and [w1]"


def test_html_and_comparisons_pass_through_untouched(registry):
    text = "a <b>bold</b>, x < y > z, <kbd>K</kbd>, <reference/>, <<<<<<< HEAD, <webhook>"
    assert registry.expand_text(text) == text
    assert stream(registry, list(text)) == text


def test_resource_alias_split_across_chunks_is_restored(registry):
    assert stream(registry, ["![diagram](res://00", "01)"]) == "![diagram](minio://docs/install.png)"


def test_unknown_resource_alias_is_removed(registry):
    assert registry.expand_text("![x](res://0042) ok") == "![x]() ok"


def test_resource_alias_at_end_of_stream_is_restored_on_flush(registry):
    decoder = registry.stream_decoder()
    assert decoder.feed("see res://0001") == "see "
    assert decoder.flush() == "minio://docs/install.png"


def test_same_decoder_class_serves_answer_and_thinking_streams(registry, expected_tags):
    answer, thinking = registry.stream_decoder(), registry.stream_decoder()
    shown_answer = answer.feed('Yes <ref id="c')
    shown_thinking = thinking.feed('c3 fits <ref id="c3"')
    shown_answer += answer.feed('2"/>')
    shown_thinking += thinking.feed("/>")
    assert shown_answer + answer.flush() == f"Yes {expected_tags['c2']}"
    assert shown_thinking + thinking.flush() == f"c3 fits {expected_tags['c3']}"
