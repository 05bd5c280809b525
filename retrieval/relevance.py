"""Does a passage bear on the question at all? The gate that lets "not in the knowledge base" happen.

Cosine similarity alone cannot say it: multilingual-e5-small scores unrelated text ~0.75-0.8,
so a fixed vector threshold either keeps everything or drops good passages (on XQuAD the gold
paragraph scores 0.81-0.91 and the best wrong one 0.79-0.87). Evidence relative to the
knowledge base's own background separates them:

    relevance = idf-weighted share of the question's terms the passage contains
              + 3 x (the passage's similarity - the median similarity of the search's hits)

Both parts are taken over the hits the search returned: terms every neighbour shares (the topic
of the knowledge base) weigh little and the question's specific terms weigh much, and the
similarity counts only as far as it stands out from the neighbourhood, which adapts to the
embedder, the language and the chunk length. A question and passage in different scripts share
no terms, so such a pair is judged on how far its similarity stands out alone.

A question joining facts names more than any one passage holds, so past five content terms the
coverage counts as a share of five terms' weight (RELEVANCE_TERMS_PER_PASSAGE); and a question
asking several things ("zstd's default level, and the maximum with --ultra?") is judged part by
part as well, so a passage answering one part is evidence. A multi-hop question's hops sit in
different passages ("When did the country of Izgoy's performer invade Manchuria?": one passage
names Izgoy, another the invasion), so the best hit also scores what the three best hits hold
together, at 0.8 of its share (RELEVANCE_JOINT_HITS, RELEVANCE_JOINT_WEIGHT): hits that only
share the question's topic rarely cover its specific terms together. Terms are compared with
accents folded ("Aschenbrodel" names "Aschenbrödel"), and a Latin stem that begins another of
five letters or more is the same word ("accur" of accurate, "accuraci" of accuracy).

Nothing passes unless the best hit reaches the threshold (the knowledge base does not hold the
answer: the fallback); then the hits reaching half of it stay, since term overlap misses
paraphrases. A bridge question's first hop names only the question's subject ("the country where
Buyende is located" against "Buyende is a town in the Eastern Region of Uganda"), so the one hit
whose document is titled by a name the question mentions passes (named_entry).
What each rule keeps and stops on XQuAD, CMRC and MuSiQue is benchmarks/relevance_gate.py's to say
(its docstring keeps the figures each rule was chosen on).
With fewer than three hits there is no neighbourhood to weigh terms against (a base of one
screenshot, say): every term then weighs the same, and a lone hit's similarity stands out from
nothing, so it passes on its share of the question's terms alone.
Question words (what, how long, does, summarize, everything, 什么, 多少 ...) are not counted: passages rarely
contain them. Known miss: a request phrased in words the passages do not use ("an overview of
the setup steps" against "Setting up the Aurora") finds nothing.
"""

from __future__ import annotations

import math
import re
import statistics
import unicodedata
from collections import Counter
from collections.abc import Sequence
from functools import cache

from ragline import defaults
from ragline.contracts.passages import SearchResult
from ragline.retrieval.tokenizer import has_han, tokenize

# How a question asks, not what about (and what it asks for: a summary, an overview): passages rarely
# contain these, and their absence says nothing.
_ENGLISH_QUESTION_WORDS = ("what which who whom whose when where why how long many much often far old name called up "
                           "do does did is are was were can could should would will "
                           # requests about the knowledge base itself, not its content
                           "summarize summarise summary overview explain describe tell give list show me about "
                           "everything anything something all more detail details please "
                           "guide manual document documents text passage")
_CHINESE_QUESTION_WORDS = "什么 哪 哪个 哪些 哪里 谁 何时 为什么 为何 怎么 怎样 如何 多少 多久 多长 多长时间 长时间 几 是否 总结 概括 介绍 文档 说明"


@cache
def question_words() -> frozenset[str]:
    """As the tokenizer spells them (English stemmed; the Chinese ones are jieba words already)."""
    return frozenset(tokenize(_ENGLISH_QUESTION_WORDS)) | frozenset(_CHINESE_QUESTION_WORDS.split())


def _without_accents(text: str) -> str:
    """"Aschenbrödel" as "Aschenbrodel", "Akinoshū" as "Akinoshu": a question typed without the
    accents still names the passage's term (only combining marks go; Hangul and Han are unchanged)."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFC", "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn"))


def terms_of(text: str) -> set[str]:
    """The text's terms as the gate compares them: tokenized (English stemmed, Chinese by jieba), accents folded."""
    return set(tokenize(_without_accents(text)))


def own_text(result: SearchResult) -> str:
    """The passage without a first line that only repeats its document's title. Every passage of the
    document carries that line, so it tells what the document is about (which the similarity part
    weighs), not that this passage answers: counted as evidence, it let on-topic passages without
    the answer through (XQuAD with the gold paragraphs removed: 79% abstained, 82% without it, gold
    kept alike; benchmarks in the closing note of issue 11)."""
    title = result.knowledge_title.strip()
    head, newline, body = result.content.partition("\n")
    if title and newline and head.strip().lower() == title.lower():
        return body
    return result.content


def with_variants(found: set[str], terms: set[str]) -> set[str]:
    """`found` plus each question term a found term is another form of. Snowball stems "accurate"
    as "accur" and "accuracy" as "accuraci" ("How accurate is the humidity reading?" against a
    table's "accuracy" column), so a Latin stem of at least RELEVANCE_VARIANT_MIN_LETTERS letters
    that begins the other counts as the same word."""
    shortest = defaults.RELEVANCE_VARIANT_MIN_LETTERS
    missing = [t for t in terms if t not in found and len(t) >= shortest and t.isascii()]
    if not missing:
        return found
    longer = [f for f in found if len(f) >= shortest and f.isascii()]
    return found | {t for t in missing if any(f.startswith(t) or t.startswith(f) for f in longer)}


# Where a question asks a second thing: "X's default level, and the maximum with --ultra?", "多长时间？在保修范围内吗？"
_PART_BREAK = re.compile(r"[?？;；。]|,\s*(?:and|but|or|also)\s+|，\s*|以及|\s+and\s+(?=(?:what|which|who|whom|whose|when|where|why|how|does|do|is|are|can|was|were|did)\b)",
                         re.IGNORECASE)


def question_parts(query: str) -> list[set[str]]:
    """The content terms of each part of a question that asks several things; [] for a single one.

    A part must hold at least RELEVANCE_MIN_PART_TERMS terms: "and why?" alone would let any
    passage with one common word through."""
    asked = question_words()
    parts = [terms_of(part) - asked for part in _PART_BREAK.split(query) if part.strip()]
    parts = [part for part in parts if len(part) >= defaults.RELEVANCE_MIN_PART_TERMS]
    return parts if len(parts) > 1 else []


def joins_facts(query: str) -> bool:
    """A question that names more than one passage holds, or asks several things."""
    return len(terms_of(query) - question_words()) > defaults.RELEVANCE_TERMS_PER_PASSAGE or bool(question_parts(query))


def _idf(terms: set[str], passages: Sequence[set[str]]) -> dict[str, float]:
    """Each term's rarity among the hits (the base's topic weighs little); alike below RELEVANCE_MIN_POOL hits."""
    size = len(passages)
    if size < defaults.RELEVANCE_MIN_POOL:  # too few hits to tell the base's topic from the question's: terms weigh alike
        return dict.fromkeys(terms, 1.0)
    frequency = Counter(term for found in passages for term in found & terms)
    return {term: math.log(1 + (size - frequency[term] + 0.5) / (frequency[term] + 0.5)) for term in terms}


def _share(found: set[str], terms: set[str], idf: dict[str, float]) -> float:
    """The idf-weighted share of `terms` in `found`. A question joining facts names more than one
    passage holds ("the waterfall in the country where the Bubye River is found"): past
    RELEVANCE_TERMS_PER_PASSAGE terms, holding that many terms' weight is full evidence."""
    scale = max(1.0, len(terms) / defaults.RELEVANCE_TERMS_PER_PASSAGE)
    return min(1.0, scale * sum(idf[term] for term in found & terms) / sum(idf.values()))


def _coverage(terms: set[str], passages: Sequence[set[str]]) -> list[float]:
    """Idf-weighted share of `terms` each passage holds."""
    idf = _idf(terms, passages)
    return [_share(found, terms, idf) for found in passages]


def _joint_share(terms: set[str], passages: Sequence[set[str]], scores: Sequence[float]) -> float:
    """What the RELEVANCE_JOINT_HITS best-scored hits hold together, at RELEVANCE_JOINT_WEIGHT.

    A multi-hop question's hops sit in different passages ("When did the country of Izgoy's
    performer invade Manchuria?": one passage names Izgoy, others the invasion), so no one passage
    reaches the bar although the base holds the answer; off-topic hits rarely cover the question
    together. Measured in the module docstring."""
    if len(passages) < defaults.RELEVANCE_MIN_POOL:
        return 0.0
    best = sorted(range(len(passages)), key=lambda j: -scores[j])[:defaults.RELEVANCE_JOINT_HITS]
    held = set().union(*(passages[j] for j in best))
    return defaults.RELEVANCE_JOINT_WEIGHT * _share(held, terms, _idf(terms, passages))


# A capitalised word past the question's first, and the capitalised words after it: "Meehan Bonnar"
_NAME = re.compile(r"(?<!^)\b[A-Z][\w\u00C0-\u024F'-]*(?:\s+[A-Z][\w\u00C0-\u024F'-]*)*")


def named_terms(query: str) -> set[str]:
    """The terms of the names the question capitalises ("Buyende", "Meehan Bonnar"); its first word is not counted."""
    return {term for match in _NAME.finditer(query) for term in terms_of(match.group(0))} - question_words()


def named_entry(query: str, results: Sequence[SearchResult]) -> int | None:
    """The index of the one hit whose document's title is a name the question mentions, when no
    other hit has a title the question names; None otherwise.

    A bridge question ("Who leads the opposition in the country where Buyende is located?") asks
    of its name a relation the name's own entry never words that way ("Buyende is a town in the
    Eastern Region of Uganda"): the entry holds the name and nothing else of the question, and
    is the first hop. When several hits share the named title (the paragraphs of one article
    about the question's subject), which of them answers is left to their own terms."""
    asked = terms_of(query) - question_words()
    names = named_terms(query)
    if not names:
        return None
    titled: dict[str, list[int]] = {}
    for index, result in enumerate(results):
        title = terms_of(result.knowledge_title) - question_words()
        if title and title <= asked and title & names:
            titled.setdefault(result.knowledge_title, []).append(index)
    entries = list(titled.values())
    return entries[0][0] if len(entries) == 1 and len(entries[0]) == 1 else None


def relevance_scores(query: str, results: Sequence[SearchResult]) -> list[float] | None:
    """One score per result; None when the question has no content terms to weigh (nothing to judge).

    A question asking several things is judged part by part too: a passage that answers one part
    well is evidence, although it holds only half of the whole question's terms. The best hit
    scores at least what the best hits hold together (_joint_share)."""
    terms = terms_of(query) - question_words()
    if not terms:
        return None
    passages = [with_variants(terms_of(own_text(result)), terms) for result in results]
    coverage = _coverage(terms, passages)
    for part in question_parts(query):
        coverage = [max(whole, share) for whole, share in zip(coverage, _coverage(part, passages), strict=True)]
    similarities = [r.vector_score for r in results if r.vector_score is not None]
    background = statistics.median(similarities) if similarities else 0.0
    query_han = has_han(query)
    scores = []
    for result, share in zip(results, coverage, strict=True):
        standout = result.vector_score - background if result.vector_score is not None else 0.0
        if query_han != has_han(result.content):  # different scripts: no shared terms to count
            scores.append(standout * defaults.CROSS_SCRIPT_RELEVANCE_SCALE)
            continue
        scores.append(share + defaults.RELEVANCE_SIMILARITY_WEIGHT * standout)
    if scores:
        best = max(range(len(scores)), key=scores.__getitem__)
        scores[best] = max(scores[best], _joint_share(terms, passages, scores))
    entry = named_entry(query, results)
    if entry is not None:
        scores[entry] = max(scores[entry], defaults.RELEVANCE_NAMED_ENTRY_SCORE)
    return scores


def relevant(query: str, results: Sequence[SearchResult], threshold: float = defaults.RELEVANCE_MIN_SCORE) -> list[SearchResult]:
    """Nothing when no result reaches `threshold` (the knowledge base does not hold the answer);
    else the results that reach a share of it, in their order, each carrying its score."""
    scores = relevance_scores(query, results)
    if scores is None:
        return list(results)
    if max(scores, default=0.0) < threshold:
        return []
    floor = threshold * defaults.RELEVANCE_KEEP_SHARE
    return [result.model_copy(update={"metadata": {**result.metadata, "relevance": round(score, 4)}})
            for result, score in zip(results, scores, strict=True) if score >= floor]
