"""Pure text helpers shared by search, rerank and merge (seed: internal/searchutil).

Simple tokens (CJK per character, other scripts per word) for Jaccard redundancy and overlap
checks, and text-level joining of neighbouring chunks: merge decides adjacency and containment
by the current text and the chunk index, never by parser offsets that manual edits invalidate.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_SIMPLE_TOKEN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]|[^\W_]+", re.UNICODE)
_SPACES = re.compile(r"\s+")


def tokenize_simple(text: str) -> list[str]:
    """TokenizeSimple: Chinese by character, everything else by lower-cased word."""
    return [token.lower() for token in _SIMPLE_TOKEN.findall(text or "")]


def overlap_coefficient(a: set[str], b: set[str]) -> float:
    """|a∩b| / min(|a|,|b|): how much of the smaller side the larger covers (a short query vs a long chunk)."""
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


def normalize_content(text: str) -> str:
    return _SPACES.sub(" ", (text or "").strip().lower())


def is_content_contained(inner: str, outer: str) -> bool:
    small, big = normalize_content(inner), normalize_content(outer)
    return bool(small) and small in big


def join_chunk_content(first: str, second: str, min_overlap: int = 8) -> str:
    """JoinChunkContent: append `second` to `first`, dropping the text they share at the seam."""
    if not first:
        return second
    if not second or second in first:
        return first
    if first in second:
        return second
    longest = min(len(first), len(second))
    for size in range(longest, min_overlap - 1, -1):
        if first.endswith(second[:size]):
            return first + second[size:]
    return f"{first}\n{second}"


def unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(item for item in items if item))


