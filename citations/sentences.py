"""Sentence ends in a decoded answer, found the same way whether it arrives whole or in pieces.

Attribution (`ragline.citations.attribution`) tags each answer sentence right where it ends, so
it needs to know where sentences end while the answer still streams. `sentence_ends` scans the
text once; without `final` it stops at the first place where text still to come could change a
decision, so a streamed answer is split exactly as the whole text would be.

A sentence ends:

* before a newline;
* after a run of `。！？` (Chinese and Japanese text needs no space after them);
* after a run of `.!?…` followed by whitespace or the end of the answer, except after an
  abbreviation (`e.g.`, `Dr.`, `U.S.`), after an ordered-list marker at the start of a line
  (`1.`), and when a lower-case word follows on the same line (`approx. five`). So `3.5`,
  `config.yaml` and `...` inside a sentence never end one.

What directly follows the punctuation stays with the sentence: closing quotes, brackets and
Markdown emphasis (`**Note.**`), and public citation tags, even after spaces (`claim. <kb .../>`):
the model's citation of a sentence belongs to that sentence even when written after its period.
"""

from __future__ import annotations

import re

_ENDS = re.compile(r"[.!?…。！？]+|\n")
_CJK_ENDS = frozenset("。！？")
PUBLIC_TAG = re.compile(r"<(?:kb|web)\s[^<>]*/>", re.IGNORECASE)
# Closers, then any public tags (the model's citations) after optional spaces.
_TAIL = re.compile(rf"""["'”’)\]」』）*_]*(?:[ \t]*{PUBLIC_TAG.pattern})*""", re.IGNORECASE)
# What may still grow into a public tag at the end of the text: spaces, `<`, `<k`, `<kb ...`.
_OPEN_TAIL = re.compile(r"[ \t]*(?:<(?:k(?:b(?:\s[^<>]*)?)?|w(?:e(?:b(?:\s[^<>]*)?)?)?)?)?\Z", re.IGNORECASE)
# Words whose period is part of the word: only those that (almost) never end a sentence. "etc."
# and "Inc." often do, and a lower-case word after them continues the sentence anyway.
ABBREVIATIONS = frozenset(
    ["approx", "cf", "dept", "dr", "eg", "esp", "fig", "figs", "ie", "jr", "mr", "mrs", "ms", "pp",
     "prof", "sr", "vol", "vs"]
)
_WORD_BEFORE = re.compile(r"(?:^|[^\w.])((?:[A-Za-z]\.)*[A-Za-z]+)\Z")
_LIST_MARKER = re.compile(r"[ \t]*\d{1,3}")
_GAP = re.compile(r"[ \t]*")


def _is_abbreviation(text: str, dot: int) -> bool:
    """Whether the single period at `dot` closes an abbreviation, a dotted acronym or a list marker."""
    if _LIST_MARKER.fullmatch(text, text.rfind("\n", 0, dot) + 1, dot):
        return True  # "1." opening a line
    word = _WORD_BEFORE.search(text, max(0, dot - 64), dot)
    if word is None:
        return False
    letters = word.group(1)
    return "." in letters or letters.lower() in ABBREVIATIONS  # e.g., U.S.; Dr.


def sentence_ends(text: str, start: int = 0, *, final: bool) -> tuple[list[int], int]:
    """Where sentences end in `text[start:]`, and up to where the text is decided.

    Returns `(ends, decided)`: each end is the position right after a sentence (where its
    citations go); `decided` is where the scan stopped. Without `final`, text from `decided` on
    may still end a sentence differently once more arrives: scan again from there with the
    longer text. With `final`, `decided` is `len(text)` and the rest is one last sentence.
    """
    ends: list[int] = []
    position = start
    while (match := _ENDS.search(text, position)) is not None:
        if match.group() == "\n":
            ends.append(match.start())
            position = match.end()
            continue
        run = match.group()
        tail_end = _TAIL.match(text, match.end())
        end = tail_end.end() if tail_end else match.end()
        if not final and _OPEN_TAIL.match(text, end):
            return ends, match.start()  # closers, spaces or a citation tag may still follow
        if run[-1] in _CJK_ENDS or _ends_here(text, match.start(), run, end, final=final):
            ends.append(end)
        position = max(end, match.end())
    return ends, len(text)


def _ends_here(text: str, run_start: int, run: str, end: int, *, final: bool) -> bool:
    """Whether a `.!?…` run followed by closers (and tags) up to `end` ends its sentence."""
    if end == len(text):
        return final
    if not text[end].isspace():
        return False  # 3.5, config.yaml, "...or"
    if run == "." and _is_abbreviation(text, run_start):
        return False
    if set(run) <= {".", "…"}:
        gap = _GAP.match(text, end)
        following = gap.end() if gap else end
        if following < len(text) and text[following].islower() and text[following].isascii():
            return False  # "approx. five", "wait... what"
    return True

