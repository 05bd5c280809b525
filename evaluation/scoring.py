"""Answer scoring for `ragline eval --answers`: exact match, token F1, "contains gold", citations.

Pure functions, no I/O, so the numbers of a report can be recomputed from its rows.

Normalisation follows the SQuAD v1.1 evaluation script (lower case, punctuation deleted, the
articles a/an/the dropped, whitespace collapsed) and is made CJK-aware the way the CMRC 2018
script segments text: every CJK character is one token, while a run of other characters (latin
words, digits) is one token per word. So Chinese answers are scored per character, English ones
per word, and mixed text ("光荣和ω-force") both ways at once. Punctuation is deleted, not turned
into a space, as SQuAD does: "1,000" and "1000" are the same token.

Metrics of one answer against several gold answers take the best gold (as both official scripts
do). Definitions used by the report:

- exact match: the normalised token sequences are equal;
- F1: harmonic mean of token precision and recall (bag of tokens) between answer and gold;
- contains gold: a gold answer's token sequence appears, contiguous, in the answer's tokens
  (the fair measure for a chat model that wraps the answer in a sentence);
- citation precision: of the distinct passages an answer cites (`<kb chunk_id=.../>` tags), the
  share whose text contains a gold answer (same normalisation); undefined without citations;
- citation coverage: of the answers that are neither the fallback nor an error, the share with
  at least one citation.

A citation is "attributed" when its tag carries attributed="true" (the system placed it, not
the model); both kinds count for precision and coverage and are reported apart.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ragline.citations.tags import tag_attributes

ARTICLES = frozenset({"a", "an", "the"})
_CJK = re.compile(
    "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002a6df\U0002a700-\U0002ebef]"
)
_PUBLIC_TAG = re.compile(r"(?is)<(kb|web|ref)(?=[\s/>])[^<>]*>(?:\s*</\1\s*>)?")
_KB_TAG = re.compile(r"(?is)<kb(?=[\s/>])[^<>]*>")


def is_cjk(char: str) -> bool:
    return bool(_CJK.match(char))


def _is_punctuation(char: str) -> bool:
    return char in string.punctuation or unicodedata.category(char).startswith("P")


def tokens(text: str) -> list[str]:
    """Normalised tokens: CJK characters one each, other runs split on whitespace, punctuation
    deleted, lower case, articles dropped (SQuAD's normalize_answer, segmented like CMRC's)."""
    out: list[str] = []
    word: list[str] = []

    def flush() -> None:
        if word:
            token = "".join(word)
            if token not in ARTICLES:
                out.append(token)
            word.clear()

    for char in unicodedata.normalize("NFKC", text).lower():
        if is_cjk(char):
            flush()
            out.append(char)
        elif char.isspace():
            flush()
        elif not _is_punctuation(char):
            word.append(char)
    flush()
    return out


def normalize(text: str) -> str:
    """The normalised text: its tokens joined by single spaces."""
    return " ".join(tokens(text))


def exact_match(prediction: str, gold: str) -> bool:
    return tokens(prediction) == tokens(gold)


def f1(prediction: str, gold: str) -> float:
    """Token F1; two texts without tokens score 1, one without tokens scores 0 (as SQuAD)."""
    predicted, expected = tokens(prediction), tokens(gold)
    if not predicted or not expected:
        return float(predicted == expected)
    common = sum((Counter(predicted) & Counter(expected)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(expected)
    return 2 * precision * recall / (precision + recall)


def contains(text: str, gold: str) -> bool:
    """The gold's tokens appear contiguously in the text's tokens (never part of a longer word)."""
    needle = tokens(gold)
    if not needle:
        return False
    return f" {' '.join(needle)} " in f" {' '.join(tokens(text))} "


def best_exact_match(prediction: str, golds: Iterable[str]) -> bool:
    return any(exact_match(prediction, gold) for gold in golds)


def best_f1(prediction: str, golds: Iterable[str]) -> float:
    return max((f1(prediction, gold) for gold in golds), default=0.0)


def contains_any(text: str, golds: Iterable[str]) -> bool:
    return any(contains(text, gold) for gold in golds)


# --- answers with citation tags ---


def strip_tags(answer: str) -> str:
    """The answer as a reader sees it, without `<kb/>`, `<web/>` or stray `<ref/>` tags."""
    return " ".join(_PUBLIC_TAG.sub(" ", answer).split())


@dataclass(frozen=True)
class Citation:
    """One distinct passage an answer cites; `attributed` when the system, not the model, placed it."""

    chunk_id: str
    attributed: bool = False


def citations(answer: str) -> list[Citation]:
    """The distinct chunks cited by `<kb chunk_id=.../>` tags, in order of first citation.

    A chunk cited by the model and also attributed by the system counts once, as model-written.
    """
    found: dict[str, bool] = {}
    for match in _KB_TAG.finditer(answer):
        attributes = tag_attributes(match.group(0))
        chunk_id = attributes.get("chunk_id", "")
        if not chunk_id:
            continue
        attributed = attributes.get("attributed", "").lower() == "true"
        found[chunk_id] = found.get(chunk_id, True) and attributed
    return [Citation(chunk_id, attributed) for chunk_id, attributed in found.items()]


def citation_precision(cited_texts: Sequence[str], golds: Sequence[str]) -> float | None:
    """Share of the cited passages that contain a gold answer; None when nothing is cited."""
    if not cited_texts:
        return None
    return sum(contains_any(text, golds) for text in cited_texts) / len(cited_texts)
