"""Whether a passage contradicts a sentence that shares its words: the veto of attribution.

Word overlap and embedding similarity both call "Batteries are covered" a match for "Batteries
and damage from lightning are not covered", and "the warranty lasts three years" a match for "a
two-year warranty". Attribution (citations/attribution.py) must not vouch for such a sentence, so
before a passage is cited for a sentence two cheap checks may veto it:

* a number: every number the sentence states (digits, English number words, Chinese numerals)
  must appear in the passage; "18 months" is no support for "12 months";
* a negation: the passage's sentence closest to it (most shared content words) must have the
  same polarity: both negated or neither ("not", "never", "n't", 不, 没, 未 ...).

One check reads the question too: asked for a default, a passage that marks the value it asks
about as the default ("900,000 bytes (the default)", "(default: 3)", "The default is to retry 20
times") supports no other number: `stated_default` finds that sentence among the answer's passages,
so the model's misreading of a sentence holding several numbers (or of another option's number)
is answered with the passage's own words. A number some passage marks as a default is left alone:
which default the question means is the model's reading, not a check's.

Neither check proves support; each only refuses what is plainly not support.

A sentence that says the passages are silent ("The manual does not mention a price.") or only
speaks to the reader ("I hope this helps.") claims nothing about the world, so no passage is
expected to support it: `claims_nothing` tells such a sentence apart, and attribution never
marks it unsupported.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from ragline import defaults
from ragline.citations.sentences import PUBLIC_TAG

Tokens = Callable[[str], frozenset[str]]

_NEGATION = re.compile(
    # not an option's name or value: "--no-keepalive", "--check=none"
    r"(?i)(?<![-=/])\b(?:not|no|never|none|nobody|nothing|neither|nor|cannot|without)\b(?![-=])|n't\b"
    # Chinese: 不 except where it starts a word that negates nothing (不同 "different", 不断 ...)
    r"|不(?![同断久少仅但管论过错])|没|未(?!来)|无法|并非|禁止"
)
_ABSENCE = re.compile(  # verbs that speak of what a text says, not of what the world is
    r"(?i)\b(?:do(?:es)?\s+not|do(?:es)?n't|did\s+not|didn't)\s+(?:\w+\s+)?(?:mention|say|state|specify|describe|explain)"
    r"|\b(?:not|never)\s+(?:\w+\s+)?(?:mentioned|stated|specified|described|documented)\b"
    r"|\bno\s+(?:\w+\s+)?(?:information|mention|details?)\b"
    r"|\b(?:could\s+not|couldn't|cannot|can't|unable\s+to)\s+(?:find|tell|say|answer|determine)\b"
    r"|\b(?:do\s+not|don't)\s+know\b"
    r"|没有(?:提到|提及|说明|提供|相关|记载|信息)|未(?:提到|提及|说明|记载)|不知道|找不到|无法(?:确定|回答|找到)"
)
_COURTESY = re.compile(
    r"(?i)\bhope (?:this|that|it) helps\b|\blet me know\b|\bfeel free\b|\b(?:happy|glad) to help\b"
    r"|\bif you have (?:any )?(?:other|more|further)? ?questions?\b|\bdon't hesitate\b"
    r"|希望(?:对您|对你|能)?(?:有所|有)?帮(?:助|到)|如(?:果)?(?:您|你)?有(?:其他|任何)(?:问题|疑问)"
)
LIST_MARKER = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+")
_CLAUSE_END = re.compile(r"[;；,，:：]\s*|\s+but\s+|但是|但")
_MIN_CLAUSE_TOKENS = 2  # "but the console is": too little to find its sentence by
# a blank line ends a sentence unless it breaks one in two (a man page's "which has not\n\n changed size")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])|(?<![a-z,])\n\s*\n|\n\s*\n(?!\s*[a-z])|\n(?=\s*(?:[-*+]|\d{1,3}[.)])\s)")
_DIGITS = re.compile(r"(?<![A-Za-z0-9_])\d+(?:[.,]\d+)*")  # not inside a Latin word: "word10", "mp3", "x86_64"
_WORD_NUMBERS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30,
    "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100,
    "thousand": 1000, "single": 1, "double": 2, "twice": 2, "half": 0.5,
}
_ENGLISH_NUMBER = re.compile(r"(?i)\b(" + "|".join(_WORD_NUMBERS) + r")\b")
_CHINESE_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_CHINESE_UNITS = {"十": 10, "百": 100, "千": 1000, "万": 10000}
_CHINESE_NUMBER = re.compile(r"[零〇一二两三四五六七八九十百千万]+(?:点[零〇一二三四五六七八九]+)?")


def chinese_number(text: str) -> float | None:
    """The value of a Chinese numeral such as 十八, 两百零五, 一点五; None when it is not one."""
    whole, _, fraction = text.partition("点")
    total, digit, seen = 0, 0, False
    for char in whole:
        if char in _CHINESE_DIGITS:
            digit, seen = _CHINESE_DIGITS[char], True
        elif char in _CHINESE_UNITS:
            total += (digit if seen else 1) * _CHINESE_UNITS[char]
            digit, seen = 0, False
        else:
            return None
    total += digit
    if fraction:
        if any(char not in _CHINESE_DIGITS for char in fraction):
            return None
        return float(f"{total}." + "".join(str(_CHINESE_DIGITS[char]) for char in fraction))
    return float(total)


def numbers(text: str) -> frozenset[float]:
    """Every number the text states, as values: "two", "2" and "两" are the same number."""
    text = PUBLIC_TAG.sub(" ", text)
    found: set[float] = set()
    for match in _DIGITS.finditer(text):
        raw = match.group(0)
        # "1,200" is twelve hundred; "1,5" (a decimal comma) and "1.5" are one and a half
        cleaned = raw.replace(",", "") if re.fullmatch(r"\d{1,3}(?:,\d{3})+", raw) else raw.replace(",", ".")
        try:
            found.add(float(cleaned))
        except ValueError:  # "1.2.3", a version: each part is a number of its own
            found.update(float(part) for part in re.split(r"[.,]", raw) if part)
    found.update(float(_WORD_NUMBERS[m.group(1).lower()]) for m in _ENGLISH_NUMBER.finditer(text))
    for match in _CHINESE_NUMBER.finditer(text):
        value = chinese_number(match.group(0))
        if value is not None:
            found.add(value)
    return frozenset(found)


def claims_nothing(sentence: str) -> bool:
    """Whether the sentence says the sources are silent ("does not mention", "no information",
    没有提到) or only speaks to the reader ("let me know", 希望对您有帮助) instead of stating a fact."""
    text = PUBLIC_TAG.sub(" ", sentence)
    return bool(_ABSENCE.search(text) or _COURTESY.search(text))


def is_negated(text: str) -> bool:
    return bool(_NEGATION.search(PUBLIC_TAG.sub(" ", text)))


_UN_WORD = re.compile(r"(?i)\bun([a-z]{3,})")


def opposite_polarity(clause: str, closest: str) -> bool:
    """Only one of the two is negated, and not merely by a prefix: "unchanged size" says what
    "has not changed size" says."""
    clause_negated = is_negated(clause)
    if clause_negated == is_negated(closest):
        return False
    plain, negated = (closest, clause) if clause_negated else (clause, closest)
    negated_words = set(re.findall(r"[a-z]+", negated.lower()))
    return not any(base.lower() in negated_words for base in _UN_WORD.findall(plain))


def closest_sentence(clause_tokens: frozenset[str], passage: str, tokens: Tokens) -> str | None:
    """The passage's sentence sharing the most content words with the clause (the first on a
    tie); None when none shares any."""
    best, best_shared = None, 0
    for candidate in _SENTENCE_END.split(passage):
        shared = len(clause_tokens & tokens(candidate))
        if shared > best_shared:
            best, best_shared = candidate, shared
    return best


def _closest_part(clause_tokens: frozenset[str], sentence: str, tokens: Tokens) -> str:
    """The clause of a passage sentence sharing the most words with the answer's clause: a
    negation elsewhere in the sentence ("which has not changed") is not that clause's."""
    parts = [part for part in _CLAUSE_END.split(sentence) if tokens(part)]
    return max(parts, key=lambda part: len(clause_tokens & tokens(part)), default=sentence)


def _clauses(sentence: str, tokens: Tokens) -> list[str]:
    return [c for c in _CLAUSE_END.split(sentence) if len(tokens(c)) >= _MIN_CLAUSE_TOKENS] or [sentence]


def stated_opposite(sentence: str, passage: str, tokens: Tokens) -> str | None:
    """The passage's sentence that says the opposite of one of `sentence`'s clauses, or None.

    Opposite, not merely unrelated: the closest sentence holds at least OPPOSITE_MIN_SHARE of the
    clause's content words (two at least) and only one of the two is negated ("batteries are
    covered by the warranty" against "Batteries and damage from lightning are not covered")."""
    sentence = LIST_MARKER.sub("", PUBLIC_TAG.sub(" ", sentence))
    for clause in _clauses(sentence, tokens):
        clause_tokens = tokens(clause)
        closest = closest_sentence(clause_tokens, passage, tokens)
        if closest is None or not opposite_polarity(clause, _closest_part(clause_tokens, closest, tokens)):
            continue
        shared = len(clause_tokens & tokens(closest))
        if shared >= _MIN_CLAUSE_TOKENS and shared >= defaults.OPPOSITE_MIN_SHARE * len(clause_tokens):
            return " ".join(closest.split())
    return None


def contradicts(sentence: str, passage: str, tokens: Tokens) -> bool:
    """True when the passage plainly does not support the sentence: a number the passage never
    states, or a clause whose closest sentence in the passage has the opposite polarity."""
    sentence = LIST_MARKER.sub("", PUBLIC_TAG.sub(" ", sentence))
    if not numbers(sentence) <= numbers(passage):
        return True
    for clause in _clauses(sentence, tokens):
        clause_tokens = tokens(clause)
        closest = closest_sentence(clause_tokens, passage, tokens)
        if closest is not None and opposite_polarity(clause, _closest_part(clause_tokens, closest, tokens)):
            return True
    return False


_ASKS_DEFAULT = re.compile(r"(?i)\bdefaults?\b|\bby default\b|默认")
_VALUE = r"(-?\d+(?:[.,]\d+)*)"
_DEFAULT_MARKS = (
    re.compile(_VALUE + r"(?:\s+[A-Za-z'-]+){0,6}\s*\((?:(?:which|this)\s+is\s+)?the\s+default\)", re.I),  # "900,000 bytes (the default)"
    re.compile(r"\(default[:=]?\s*" + _VALUE, re.I),  # "(default: 3)"
    re.compile(r"\bdefaults?\b(?:\s+[A-Za-z'-]+){0,3}\s+(?:is|are|=|:)\s+(?:(?:to|set\s+to)\s+[A-Za-z'-]+\s+)?" + _VALUE, re.I),  # "default is 20"
    re.compile(r"\bdefault\b(?:\s+[A-Za-z'-]+){0,3}\s*\(" + _VALUE + r"\)", re.I),  # "default compression level (-6)"
    re.compile(r"默认(?:值)?(?:为|是|：|:)\s*" + _VALUE),
)


def default_values(text: str) -> frozenset[float]:
    """The values a text marks as the default (the number the marker is attached to), as numbers."""
    return frozenset().union(*(numbers(match.group(1).lstrip("-")) for mark in _DEFAULT_MARKS for match in mark.finditer(text)))


def _same_value(stated: float, marked: frozenset[float]) -> bool:
    """"900k" states the "900,000 bytes" a passage marks: a value is also the same in thousands."""
    return any(stated == value or stated * 1000 == value or stated * 1024 == value for value in marked)


def asks_default(question: str) -> bool:
    return bool(_ASKS_DEFAULT.search(question))


def stated_default(sentence: str, passages: Sequence[tuple[str, str]], question: str, tokens: Tokens) -> tuple[str, str] | None:
    """Asked for a default: (alias, sentence) of the passage sentence marking the default the
    question asks about (the marked sentence sharing the most content words with the question, two
    at least), when `sentence` states a default with numbers and none of them is a default any
    passage marks; else None. A sentence that names no default answers another part of the
    question ("the maximum with --ultra is 22")."""
    if not (asks_default(question) and _ASKS_DEFAULT.search(sentence)):
        return None
    stated = numbers(LIST_MARKER.sub("", PUBLIC_TAG.sub(" ", sentence)))
    if not stated:
        return None
    asked = tokens(question)
    best, best_shared, every_marked = None, 1, frozenset[float]()
    for alias, passage in passages:
        for candidate in _SENTENCE_END.split(passage):
            marked = default_values(candidate)
            if not marked:
                continue
            every_marked |= marked
            shared = len(asked & tokens(candidate))
            if shared > best_shared:
                best, best_shared = (alias, " ".join(candidate.split())), shared
    if best is None or any(_same_value(value, every_marked) for value in stated):
        return None
    return best
