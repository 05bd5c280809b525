"""The support veto: a passage that states another number or the opposite is no support."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragline.citations.attribution import content_tokens
from ragline.citations.support import (
    chinese_number,
    claims_nothing,
    closest_sentence,
    contradicts,
    default_values,
    is_negated,
    numbers,
    opposite_polarity,
    stated_default,
    stated_opposite,
)

WARRANTY = ("Northwind Instruments gives a two-year warranty on the Aurora console and outdoor sensor from the "
            "date of purchase. Batteries and damage from lightning are not covered. Repairs take about ten working days.")
SPECS = ("Battery life of the outdoor sensor is about 18 months with lithium AA cells and 12 months with\n"
         "alkaline cells. The console draws 1.2 W from its USB-C adapter.")
WARRANTY_ZH = "控制台和室外传感器享有两年保修。电池和雷击损坏不在保修范围内。维修大约需要十个工作日。"


@pytest.mark.parametrize(("sentence", "passage"), [
    ("Batteries are covered by the warranty.", WARRANTY),
    ("Batteries and damage from lightning are covered.", WARRANTY),
    ("Northwind gives a three-year warranty on the console.", WARRANTY),
    ("The battery lasts about 24 months with lithium cells.", SPECS),
    ("Repairs do not take ten working days.", WARRANTY),
    ("电池在保修范围内。", WARRANTY_ZH),
    ("控制台享有三年保修。", WARRANTY_ZH),
])
def test_a_sentence_the_passage_contradicts_is_refused(sentence, passage):
    assert contradicts(sentence, passage, content_tokens)


@pytest.mark.parametrize(("sentence", "passage"), [
    ("Batteries are not covered by the warranty.", WARRANTY),
    ("Northwind gives a two-year warranty on the console.", WARRANTY),
    ("The warranty lasts two years, but batteries are not covered.", WARRANTY),
    ("The battery lasts about eighteen months with lithium cells.", SPECS),
    ("Repairs take about 10 working days.", WARRANTY),
    ("电池不在保修范围内。", WARRANTY_ZH),
    ("控制台享有两年保修。", WARRANTY_ZH),
    ("1. The console draws 1.2 W.", SPECS),
])
def test_a_sentence_the_passage_states_is_not_refused(sentence, passage):
    assert not contradicts(sentence, passage, content_tokens)


def test_numbers_are_values_whatever_their_spelling():
    assert numbers("two AA cells, 2 AA cells, 两节电池") == {2.0}
    assert numbers("1,200 readings every 1.5 s") == {1200.0, 1.5}
    assert numbers('after <kb chunk_id="c9f3" title="v2"/> nothing') == set()


def test_digits_inside_a_latin_word_are_a_name_not_a_number():
    """"word10", "mp3", "x86_64" state no quantity (a scripted answer of word0 ... word39 is not made up);
    a number after a hyphen, a space or a Chinese character still counts."""
    assert numbers("word10 mp3 x86_64 e5") == set()
    assert numbers("a B-29 bomber, 保修2年") == {29.0, 2.0}


@pytest.mark.parametrize(("text", "negated"), [
    ("are not covered", True), ("isn't covered", True), ("never pairs", True), ("不在保修范围内", True),
    ("没有保修", True), ("are covered", False), ("不同的传感器", False), ("未来三天", False), ("无线电", False),
])
def test_negation_cues(text, negated):
    assert is_negated(text) is negated


_DIGITS = "零一二三四五六七八九"


def _chinese(value: int) -> str:
    """The plain Chinese numeral of 1..9999 (一千零五, 二十, 十 for ten)."""
    out, zero = "", False
    for unit, name in ((1000, "千"), (100, "百"), (10, "十")):
        digit = value // unit % 10
        if digit:
            out += ("零" if zero and out else "") + ("" if digit == 1 and unit == 10 and not out else _DIGITS[digit]) + name
            zero = False
        elif out:
            zero = True
    if value % 10:
        out += ("零" if zero else "") + _DIGITS[value % 10]
    return out


@given(st.integers(min_value=1, max_value=9999))
def test_chinese_numerals_read_back_as_their_value(value):
    assert chinese_number(_chinese(value)) == float(value)


@given(st.text(alphabet="零一二两三四五六七八九十百千万点abc", max_size=12))
def test_chinese_number_never_fails_on_any_text(text):
    value = chinese_number(text)
    assert value is None or value >= 0


@pytest.mark.parametrize(("sentence", "nothing"), [
    ("The manual does not mention what the station costs.", True),
    ("The documents don't say how long the repair takes.", True),
    ("It is not stated in the manual.", True),
    ("There is no information about the price.", True),
    ("I could not find the answer in the documents.", True),
    ("I hope this helps!", True),
    ("Let me know if you have any other questions.", True),
    ("手册中没有提到价格。", True),
    ("希望对您有帮助。", True),
    # facts, negated or not: the passages must support these
    ("Batteries are not covered by the warranty.", False),
    ("The warranty does not include batteries.", False),
    ("The console does not support 5 GHz networks.", False),
    ("The sensor runs on two AA batteries.", False),
    ("电池不在保修范围内。", False),
])
def test_a_sentence_about_the_sources_silence_or_to_the_reader_claims_nothing(sentence, nothing):
    assert claims_nothing(sentence) is nothing


@pytest.mark.parametrize("text, value", [
    ("Block sizes from 100,000 bytes to 900,000 bytes (the default) respectively.", 900_000),
    ("Setting the number to 0 makes curl do no retries (which is the default).", 0),
    ("-T#, --threads=#: Compress using # working threads (default: 1).", 1),
    ("The default is to retry 20 times, with the exception of fatal errors.", 20),
    ("The default read timeout is 900 seconds.", 900),
    ("The default is -6.", 6),
    ("Use the default compression level (-6).", 6),
    ("超时时间默认为30秒。", 30),
])
def test_default_values_are_the_numbers_a_default_marker_is_attached_to(text, value):
    assert default_values(text) == {value}


@given(st.integers(min_value=0, max_value=10**7), st.sampled_from(["(default: {})", "The default is {}.", "{} bytes (the default)"]))
def test_any_marked_default_is_read_back(value, form):
    assert default_values(f"Other figures: 7 and 12. {form.format(f'{value:,}')}") == {value}


BZIP2 = ("-1 (or --fast) to -9 (or --best): Set the block size to 100 k, 200 k .. 900 k when compressing. "
         "Compression is done with blocks; block sizes range from 100,000 bytes to 900,000 bytes (the default) respectively.")
ASKED = "What is the default block size of bzip2?"


def test_asked_for_a_default_a_passage_marking_another_value_says_so():
    said = stated_default("The default block size of bzip2 is 100,000 bytes.", [("c1", BZIP2)], ASKED, content_tokens)
    assert said == ("c1", "Compression is done with blocks; block sizes range from 100,000 bytes to 900,000 bytes (the default) respectively.")


@pytest.mark.parametrize("sentence, question", [
    ("The default block size of bzip2 is 900,000 bytes.", ASKED),
    ("The default block size of bzip2 is 900k.", ASKED),  # the same value in thousands
    ("The block size is 100,000 bytes with -1.", "What block size does bzip2 use with -1?"),  # no default asked
    ("bzip2 uses blocks by default.", ASKED),  # no number stated
    ("The largest block size is 100,000 bytes.", ASKED),  # names no default: another part of the question
])
def test_the_default_check_leaves_what_does_not_contradict_the_marked_default(sentence, question):
    assert stated_default(sentence, [("c1", BZIP2)], question, content_tokens) is None


ZSTD = [("c1", "-#: # compression level [1-19] (default: 3)"), ("c2", "-T#, --threads=#: Compress using # working threads (default: 1).")]


def test_a_number_another_passage_marks_as_a_default_is_left_to_the_model():
    """Which default a question means is the model's reading: "1" is a default (of the threads)."""
    asked = "How many worker threads does zstd use for compression by default?"
    assert stated_default("zstd uses 1 worker thread by default.", ZSTD, asked, content_tokens) is None
    assert stated_default("zstd uses 4 worker threads by default.", ZSTD, asked, content_tokens) == ZSTD[1]


def test_a_marker_broken_across_lines_is_read():
    """A man page as `man` renders it: "(which is the\\n\\t      default)"."""
    page = "Setting  the  number to 0 makes curl do no retries (which is the\n\t      default). Transient error means either:"
    assert default_values(page) == {0}


@pytest.mark.parametrize("text", ["use --check=none or --check=crc32", "This option has an effect only with --no-keepalive.", "-n, --no-clobber"])
def test_an_options_name_or_value_is_no_negation(text):
    """Man pages: "--check=none" and "--no-keepalive" name options; they negate nothing."""
    assert not is_negated(text)


def test_a_blank_line_inside_a_sentence_does_not_split_it():
    """A man page as rendered: "reopen a FILE which has not\\n\\n changed size": the negation and
    the number stay in one sentence, so "after 5 iterations" is not the opposite of "has not"."""
    page = "--max-unchanged-stats=N\n\t with --follow=name, reopen a FILE which has not\n\n\t changed  size  after  N  (default 5) iterations."
    answer = "With --follow=name, tail will reopen a file by default after 5 iterations of unchanged size."
    assert stated_opposite(answer, page, content_tokens) is None


def test_a_prefix_negation_is_the_same_polarity_as_a_not():
    assert not opposite_polarity("after 5 iterations of unchanged size", "reopen a FILE which has not changed size after 5 iterations")
    assert opposite_polarity("batteries are covered by the warranty", "Batteries and damage from lightning are not covered.")


def test_a_blank_line_that_breaks_a_sentence_keeps_it_whole_and_one_after_a_heading_ends_it():
    page = "reopen a FILE which has not\n\n\t changed  size  after  N  (default 5) iterations.\n\nEXAMPLES\n\n   Basics of it"
    whole = closest_sentence(content_tokens("reopen a file whose size changed"), page, content_tokens)
    assert whole is not None and " ".join(whole.split()) == "reopen a FILE which has not changed size after N (default 5) iterations."
    assert closest_sentence(content_tokens("basics"), page, content_tokens) == "   Basics of it"
