"""The support veto: a passage that states another number or the opposite is no support."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragline.citations.attribution import content_tokens
from ragline.citations.support import chinese_number, claims_nothing, contradicts, is_negated, numbers

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
