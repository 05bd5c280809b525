from hypothesis import given
from hypothesis import strategies as st

from ragline.models.think import ThinkSplitter, strip_think

PIECES = st.lists(st.sampled_from(["<think>", "</think>", "<", "</", "think", ">", "a", "é", "答", " ", "<th"]), max_size=30)


def _split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(c, len(text)) for c in cuts})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)])]


def _one_shot(text: str):
    splitter = ThinkSplitter()
    return splitter.feed(text) + splitter.flush()


def _joined(parts, kind):
    return "".join(p.text for p in parts if p.kind == kind)


@given(PIECES.map("".join), st.lists(st.integers(0, 200), max_size=10))
def test_streaming_split_equals_one_shot_split_for_any_chunking(text, cuts):
    splitter = ThinkSplitter()
    streamed = [part for chunk in _split(text, cuts) for part in splitter.feed(chunk)] + splitter.flush()
    expected = _one_shot(text)
    for kind in ("answer", "thinking"):
        assert _joined(streamed, kind) == _joined(expected, kind)


@given(PIECES.map("".join))
def test_text_without_think_tags_passes_through_whole_as_answer(text):
    text = text.replace("<think>", "<thinx>").replace("</think>", "</thinx>")
    parts = _one_shot(text)
    assert _joined(parts, "answer") == text and _joined(parts, "thinking") == ""


def test_reasoning_between_tags_is_thinking():
    parts = _one_shot("<think>plan</think>answer")
    assert (_joined(parts, "thinking"), _joined(parts, "answer")) == ("plan", "answer")


def test_a_lone_angle_bracket_is_not_held_forever():
    splitter = ThinkSplitter()
    assert _joined(splitter.feed("a < b"), "answer") == "a < b"


def test_strip_think_drops_closed_and_unclosed_blocks():
    assert strip_think("<think>x</think>Answer") == "Answer"
    assert strip_think("Answer<think>cut off") == "Answer"
