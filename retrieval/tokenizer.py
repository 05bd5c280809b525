"""Keyword tokens: jieba `cut_for_search` for Chinese runs, stemmed words for everything else.

Replaces types.Jieba.CutForSearch and the keyword-side text handling of the seed's keyword
engines. Mixed Chinese/Latin text is split where the script switches, so "iPhone15手机" gives
"iphone15" + "手机" instead of one character per token. Index and query go through the same
function, which is what keeps BM25 (bm25s or Redis) consistent.
"""

from __future__ import annotations

import logging
import re
import threading
from functools import lru_cache

import jieba
import Stemmer
from bm25s.stopwords import STOPWORDS_EN

HAN = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_RUNS = re.compile(rf"([{HAN}]+)|([^\W_{HAN}]+)")
_HAN_CHAR = re.compile(rf"[{HAN}]")

# Function words that carry no topic; dropping them lifts English BM25 (measured on Cranfield)
# and keeps Chinese question particles from matching every paragraph.
STOPWORDS_ZH = frozenset(
    ["的", "了", "是", "在", "和", "与", "及", "或", "吗", "呢", "吧", "啊", "呀", "哪", "哪些", "哪个", "什么", "怎么", "怎样", "如何", "为什么", "谁", "几", "多少", "被", "把", "由", "对", "从", "这", "那", "这个", "那个", "其", "之", "也", "都", "就", "而", "并", "等", "着", "过", "一个", "有", "为", "以", "于", "上", "中", "下", "个", "该", "所"]
)
STOPWORDS = frozenset(STOPWORDS_EN) | STOPWORDS_ZH

_jieba_lock = threading.Lock()
_jieba_ready = False


def ensure_jieba() -> None:
    """jieba loads its dictionary on first use and is not thread-safe while doing so."""
    global _jieba_ready
    if _jieba_ready:
        return
    with _jieba_lock:
        if not _jieba_ready:
            jieba.setLogLevel(logging.WARNING)
            jieba.initialize()
            _jieba_ready = True


@lru_cache(maxsize=1)
def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("english")


def has_han(text: str) -> bool:
    return _HAN_CHAR.search(text) is not None


def split_scripts(text: str) -> list[tuple[str, bool]]:
    """Runs of (text, is_han): Chinese runs and word runs, punctuation and spaces dropped."""
    return [(han or word, bool(han)) for han, word in _RUNS.findall(text)]


def raw_tokens(text: str) -> list[str]:
    """Lower-cased words and jieba search-mode words, stop words kept, nothing stemmed."""
    out: list[str] = []
    for run, is_han in split_scripts(text.lower()):
        if is_han:
            ensure_jieba()  # only Chinese text pays for loading the dictionary (~1 s)
            out.extend(w for w in jieba.cut_for_search(run) if w.strip())
        else:
            out.append(run)
    return out


def tokenize(text: str) -> list[str]:
    """BM25 tokens: raw tokens minus stop words, Latin words Snowball-stemmed."""
    words = [t for t in raw_tokens(text) if t not in STOPWORDS]
    latin = [i for i, t in enumerate(words) if not has_han(t)]
    if latin:
        stems = _stemmer().stemWords([words[i] for i in latin])
        for i, stem in zip(latin, stems):
            words[i] = stem
    return words


UNTITLED = "untitled"  # the title of a document that has none: never indexed as a word


def keyword_tokens(text: str, title: str) -> list[str]:
    """BM25 tokens of a chunk: its document's title (a title field, as BM25F weights one) and its text
    (benchmarks/retrieval_quality.py measures the title field on Cranfield, CMRC and XQuAD)."""
    return (tokenize(title) if title and title != UNTITLED else []) + tokenize(text)
