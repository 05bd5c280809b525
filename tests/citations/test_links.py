"""Links in an answer come from its sources, or they go; streamed exactly as the whole text."""

import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from ragline.citations.links import REMOVED, LinkGuard

SOURCES = ["Firmware updates: see https://aurora.example/support/firmware for the latest release.",
           "The console's manual lives at www.aurora.example/manual."]


def test_a_link_in_no_source_is_removed_and_a_markdown_link_keeps_its_words():
    guard = LinkGuard(SOURCES)
    text = "Update via https://aurora.example/support/firmware. Or click [here](https://evil.example/x?id=1) now, or http://evil.example."
    assert guard.check(text) == (f"Update via https://aurora.example/support/firmware. Or click here {REMOVED} now, or {REMOVED}.")
    assert guard.check("Manual: https://www.aurora.example/manual/") == "Manual: https://www.aurora.example/manual/"
    assert guard.check("No links at all.") == "No links at all."


def test_the_users_own_link_may_come_back():
    guard = LinkGuard([*SOURCES, "Compare with https://mine.example/notes please"])
    assert guard.check("As in https://mine.example/notes, ...") == "As in https://mine.example/notes, ..."


ANSWER = st.lists(st.sampled_from(["See ", "https://evil.example/a", "[docs](", "https://aurora.example/support/firmware", ") ",
                                   "www.", "evil.example", ". ", "h", "tt", "ps://", "[not a link] ", "\n", "words "]), max_size=25)


@given(ANSWER, st.lists(st.integers(1, 12), max_size=40))
@example(["[docs](", "\n", "https://evil.example/a", ") "], [8])  # a newline after "](" still opens a link
@settings(max_examples=200, deadline=None)
def test_a_streamed_answer_comes_out_as_the_whole_text_would(pieces, cuts):
    guard = LinkGuard(SOURCES)
    text = "".join(pieces)
    stream, shown, position = guard.stream(), [], 0
    for size in cuts:
        shown.append(stream.feed(text[position:position + size]))
        position += size
    shown.append(stream.feed(text[position:]))
    shown.append(stream.flush())
    assert "".join(shown) == guard.check(text)
    assert not re.search(r"(?i)(https?://|www\.)evil", "".join(shown))  # a bare "evil.example" is words, not a link
