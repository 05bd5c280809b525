"""Links in an answer come from its sources, or they go; streamed exactly as the whole text."""

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ragline.citations.links import EMAIL_REMOVED, IMAGE_REMOVED, PHONE_REMOVED, REMOVED, LinkGuard

SOURCES = ["Firmware updates: see https://aurora.example/support/firmware for the latest release.",
           "The console's manual lives at www.aurora.example/manual.",
           "Warranty repairs: call 0800 123 4567 or write to service@aurora.example."]
OWN_IMAGE = "/api/v1/images/" + "a" * 64 + ".png"


def test_a_link_in_no_source_is_removed_and_a_markdown_link_keeps_its_words():
    guard = LinkGuard(SOURCES)
    text = "Update via https://aurora.example/support/firmware. Or click [here](https://evil.example/x?id=1) now, or http://evil.example."
    assert guard.check(text) == (f"Update via https://aurora.example/support/firmware. Or click here {REMOVED} now, or {REMOVED}.")
    assert guard.check("[here 0909 879 0101](https://evil.example)") == f"here {PHONE_REMOVED} {REMOVED}"  # its words are checked too
    assert guard.check("Manual: https://www.aurora.example/manual/") == "Manual: https://www.aurora.example/manual/"
    assert guard.check("No links at all.") == "No links at all."


def test_the_users_own_link_may_come_back():
    guard = LinkGuard([*SOURCES, "Compare with https://mine.example/notes please"])
    assert guard.check("As in https://mine.example/notes, ...") == "As in https://mine.example/notes, ..."


def test_a_kept_markdown_link_shows_its_host():
    guard = LinkGuard(SOURCES)
    assert guard.check("[Firmware](https://aurora.example/support/firmware).") == "[Firmware](https://aurora.example/support/firmware) (aurora.example)."
    assert guard.check("[aurora.example manual](https://www.aurora.example/manual)") == "[aurora.example manual](https://www.aurora.example/manual)"


def test_a_phone_number_or_e_mail_address_in_no_source_is_replaced_by_a_note():
    guard = LinkGuard(SOURCES)
    text = "For a kit call +44 909 879 0101 or (0906) 555-0199, or mail setup@frost-alerts.example; repairs: 0800-123-4567, service@aurora.example."
    assert guard.check(text) == (f"For a kit call {PHONE_REMOVED} or {PHONE_REMOVED}, or mail {EMAIL_REMOVED}; repairs: 0800-123-4567, "
                                 "service@aurora.example.")


def test_numbers_that_are_no_phone_numbers_stay():
    text = "It shows 10.0 mm, firmware 1.2.3.4, 100 000 readings, 1,060 chunks from 2024-05-01, 12:30-14:00, 25 to 50 mm."
    assert LinkGuard(SOURCES).check(text) == text


def test_only_the_services_own_images_are_kept_whatever_the_sources():
    tracker = "![status](https://pixel.evil-track.example/p.gif?q=logging+question)"
    guard = LinkGuard([*SOURCES, f"Live status: {tracker}"])  # in a source, still loaded by whoever renders the answer
    assert guard.check(f"Logs every 5 minutes. {tracker}") == f"Logs every 5 minutes. {IMAGE_REMOVED}"
    assert guard.check(f"![chart]({OWN_IMAGE}) and ![c](local://images/{'b' * 64}.jpg)") == f"![chart]({OWN_IMAGE}) and ![c](local://images/{'b' * 64}.jpg)"
    assert LinkGuard.images_only().check(f"{tracker} https://anything.example 0909 879 0101") == f"{IMAGE_REMOVED} https://anything.example 0909 879 0101"


ANSWER = st.lists(st.sampled_from(["See ", "https://evil.example/a", "[docs](", "https://aurora.example/support/firmware", ") ",
                                   "www.", "evil.example", ". ", "h", "tt", "ps://", "[not a link] ", "\n", "words ",
                                   "!", "![x](", "https://pixel.example/p.gif", OWN_IMAGE, "call ", "+44 ", "0909", " 879", "-0101", "0800 ",
                                   "123 4567", "(0906) ", "mail ", "setup", "@", "evil", ".example", "service@aurora.example", "1", "2"]),
                  max_size=25)


@given(ANSWER, st.lists(st.integers(1, 12), max_size=40))
@example(["[docs](", "\n", "https://evil.example/a", ") "], [8])  # a newline after "](" still opens a link
@example(["setup", "@", "evil"], [])  # no address without a dot in its domain: words, kept
@example(["ps://", "(0906) ", "123 4567"], [1, 1, 10])  # a phone number goes on after a space
@example(["https://evil.example/a", "![x](", ") "], [1])  # an image glued to a URL is an image (hypothesis found it in CI)
@settings(max_examples=200, deadline=None)
def test_a_streamed_answer_comes_out_as_the_whole_text_would(pieces, cuts):
    _streamed_as_whole(LinkGuard.images_only(), pieces, cuts)  # what an answer without sources gets: images held, nothing else
    shown = _streamed_as_whole(LinkGuard(SOURCES), pieces, cuts)
    # a bare "evil.example" is words, not a link, and "setup@evil" no address (hypothesis found it in CI)
    assert not re.search(r"(?i)(https?://|www\.)(evil|pixel)|setup@evil\.example", shown)


def _streamed_as_whole(guard: LinkGuard, pieces: list[str], cuts: list[int]) -> str:
    """What the guard's stream showed of `pieces` fed in `cuts`, checked equal to its check of the whole text."""
    text = "".join(pieces)
    stream, shown, position = guard.stream(), [], 0
    for size in cuts:
        shown.append(stream.feed(text[position:position + size]))
        position += size
    shown.append(stream.feed(text[position:]))
    shown.append(stream.flush())
    assert "".join(shown) == guard.check(text)
    return "".join(shown)


def test_an_image_glued_to_a_url_goes_even_without_sources():
    """A renderer loads `![x](...)` after a URL as an image; the URL must not swallow its "!"."""
    text = "https://aurora.example/a![x](https://pixel.example/p.gif?q=wifi)"
    assert LinkGuard.images_only().check(text) == "https://aurora.example/a" + IMAGE_REMOVED
    assert LinkGuard(SOURCES).check("https://aurora.example/support/firmware!") == "https://aurora.example/support/firmware!"


def test_an_answer_without_sources_streams_words_as_they_come():
    stream = LinkGuard.images_only().stream()
    assert [stream.feed(piece) for piece in ("Ber", "lin", " it is ", "![x", "](https://p.example/a.gif)", " done")] == \
        ["Ber", "lin", " it is ", "", IMAGE_REMOVED, " done"]


@pytest.mark.parametrize("chunks", [
    ["Up to", " three minutes", ' <ref id="c1"/>', "."],  # the tag whole in one token: its words are no address
    ["Hold the button", " until it blinks", " <ref i", 'd="c1"', "/>", "."],  # the tag split over tokens
])
def test_a_ref_tag_goes_out_whole_with_the_space_before_it(chunks):
    """The ref-tag decoder after the guard drops the space before a tag only when both arrive
    together; split apart, Studio and the embedding streams showed "minutes ." (CI caught it)."""
    stream = LinkGuard(["Pairing takes up to three minutes.", "Hold the button until it blinks."]).stream()
    pieces = [stream.feed(chunk) for chunk in chunks] + [stream.flush()]
    assert "".join(pieces) == "".join(chunks)
    assert any(' <ref id="c1"/>' in piece for piece in pieces), pieces
