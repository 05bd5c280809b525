"""Citations for answers whose model wrote none: each sentence matched to the passages it uses.

Ours, not the seed's. Small local models (the 0.5B and 1.5B Qwen) answer from the contexts but rarely
write `<ref id="cN"/>`, so their answers would show no sources. Attribution tags each sentence
of such an answer with the passages that support it, as the same public tag a ref expands to,
marked `attributed="true"` so the page and the CLI can tell a match from a citation.

Evidence is lexical overlap (the share of the sentence's content tokens, BM25's tokenizer:
stemmed words, jieba for Chinese) plus the embedding similarity of sentence and passage, with
the weights and thresholds in `ragline.defaults` (measured there). At most
`ATTRIBUTION_MAX_PASSAGES` per sentence, and only passages close to the best one.

Rules:

* Only this answer's evidence is cited: the passages given to the model, each under the alias
  the registry gave it (`Registry.citable_alias`), and the tag comes from the registry's own
  gate (`Registry.attributed_tag`). Nothing in the answer text names a source: ids or tags the
  model writes never choose one.
* Mixed answers, per sentence: a sentence that already carries a citation of the model (a
  public tag after decoding, also when written after its period) is left as it is; sentences
  without one are attributed. Model-written refs go through the decoder exactly as before.
* Too little to match is not attributed: sentences under `ATTRIBUTION_MIN_CONTENT_TOKENS`
  content tokens, code blocks, table rows. Except a quote: a short answer ("Southern Border
  Region", "1962") copied word for word from passages cites those passages, since that is where
  it came from (whole words, at least `ATTRIBUTION_QUOTE_MIN_CHARS` characters).
* Unsupported is said, not hidden: a prose sentence with enough words to judge that no passage
  supports (none close enough, or each vetoed by the support check) is followed by the
  unsupported mark (`tags.UNSUPPORTED_MARK`) instead of its nearest passage, unless it only says
  the passages are silent or speaks to the reader (`support.claims_nothing`). Short sentences
  that quote nothing and sentences met after the embedder failed are not judged: no mark.
* Streaming: text passes through as it arrives (held back only at a possible sentence end, see
  `ragline.citations.sentences`); a sentence's tags follow it as soon as it is known to have
  ended, the last one at `finish`. The one-shot `attribute_text` runs the same code, so a
  streamed answer ends as the same text. If the embedder fails, the rest of the answer goes
  out unattributed (attribution decorates an answer; it never fails one).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ragline import defaults
from ragline.citations.sentences import PUBLIC_TAG, sentence_ends
from ragline.citations.sources import SourceChunk
from ragline.citations.support import LIST_MARKER, asks_default, claims_nothing, contradicts, numbers, stated_default, stated_opposite
from ragline.citations.tags import UNSUPPORTED_MARK
from ragline.retrieval.relevance import question_words
from ragline.retrieval.tokenizer import tokenize

if TYPE_CHECKING:
    from ragline.citations.registry import Registry

log = logging.getLogger(__name__)

_FENCE_LINE = re.compile(r"^[ \t]*(?:```|~~~)", re.MULTILINE)


class TextEmbedder(Protocol):
    """What attribution needs of `ragline.models.embeddings.Embedder`."""

    async def embed_query(self, text: str) -> list[float]: ...

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]: ...


@dataclass(frozen=True, slots=True)
class Passage:
    """One passage the model was given, under its answer-local alias."""

    alias: str
    text: str


@dataclass(frozen=True, slots=True)
class Verdict:
    """What attribution found for one sentence: its supporting passages' aliases, best first, and
    whether the sentence was judged (enough words to match, and a working embedder). `opposite`:
    a close passage's alias and its sentence that says the opposite; `unsourced_number`: the
    sentence states a number no passage holds (the model's memory, not the knowledge base)."""

    aliases: list[str]
    judged: bool
    opposite: tuple[str, str] | None = None
    unsourced_number: bool = False


@dataclass(frozen=True, slots=True)
class Judgement:
    """One sentence of the answer as attribution left it: followed by `tags` in the answer text."""

    sentence: str
    tags: str
    verdict: Verdict


@functools.lru_cache(maxsize=4096)  # the support check asks again for the same passage sentences
def content_tokens(text: str) -> frozenset[str]:
    """The words that carry meaning: citation tags, list markers and stop words left out."""
    return frozenset(tokenize(LIST_MARKER.sub("", PUBLIC_TAG.sub(" ", text))))


def evidence_score(lexical: float, similarity: float) -> float:
    """Lexical share and e5 cosine combined into one score in [0, 1] (see ragline.defaults)."""
    floor, ceiling = defaults.ATTRIBUTION_SIMILARITY_FLOOR, defaults.ATTRIBUTION_SIMILARITY_CEILING
    scaled = min(1.0, max(0.0, (similarity - floor) / (ceiling - floor)))
    weight = defaults.ATTRIBUTION_LEXICAL_WEIGHT
    return weight * lexical + (1.0 - weight) * scaled


class Attributor:
    """Matches sentences to one answer's passages; passage vectors are computed once, on first need."""

    def __init__(self, passages: Sequence[Passage], embedder: TextEmbedder, tag_for: Callable[[str], str],
                 question: str = "") -> None:
        self._passages = list(passages)
        self._question = question
        self._tokens: list[frozenset[str]] | None = None
        self._embedder = embedder
        self.tag_for = tag_for  # the attributed tag of one of this answer's passages (grounding quotes with it too)
        self._vectors: np.ndarray | None = None
        self._numbers: frozenset[float] = frozenset()
        self._failed = False
        self.judgements: list[Judgement] = []  # every judged sentence, in answer order (citations/grounding.py reads them)

    @classmethod
    def for_answer(cls, registry: Registry, sources: Iterable[SourceChunk], embedder: TextEmbedder | None,
                   question: str = "") -> Attributor | None:
        """An attributor over the sources this answer registered as evidence; None when there is
        nothing to attribute (no embedder, citations off, no such passage). `question`: what a
        short answer answers (a quote is a claim only together with its question)."""
        if embedder is None or not registry.citations_enabled:
            return None
        passages: dict[str, Passage] = {}
        for source in sources:
            alias = registry.citable_alias(source)
            if alias and alias not in passages and source.content.strip():
                passages[alias] = Passage(alias, source.content)
        return cls(list(passages.values()), embedder, registry.attributed_tag, question) if passages else None

    def stream(self) -> AttributionStream:
        """A fresh stream for one answer channel."""
        return AttributionStream(self)

    async def attribute_text(self, text: str) -> str:
        """The whole answer with its attributed tags: exactly what a stream of it ends as."""
        return await self.stream().finish(text)

    async def match(self, sentence: str) -> list[str]:
        """Aliases of the passages that support `sentence`, best first; [] when none does."""
        return (await self.verdict(sentence)).aliases

    async def verdict(self, sentence: str) -> Verdict:
        """The passages that support `sentence`, and whether it was judged at all: a sentence too
        short to match (not quoted either) or met after the embedder failed is not judged."""
        if self._failed:
            return Verdict([], judged=False)
        if self._tokens is None:  # in a thread: the first jieba call of a process loads its dictionary (~1 s)
            self._tokens = await asyncio.to_thread(lambda: [content_tokens(p.text) for p in self._passages])
            # a number the user stated is not the model's invention either
            self._numbers = frozenset().union(numbers(self._question), *(numbers(p.text) for p in self._passages))
        tokens = content_tokens(sentence)
        if len(tokens) < defaults.ATTRIBUTION_MIN_CONTENT_TOKENS:
            quoted = await self._quote_sources(sentence) if tokens else []
            return Verdict(quoted, judged=bool(quoted))
        unsourced = not numbers(sentence) <= self._numbers
        if asks_default(self._question):  # a misread default is answered with the sentence that marks it
            passages = [(p.alias, p.text) for p in self._passages]
            if said := await asyncio.to_thread(stated_default, sentence, passages, self._question, content_tokens):
                return Verdict([], judged=True, opposite=said, unsourced_number=unsourced)
        scores = await self._scores(sentence, tokens)
        if scores is None:
            return Verdict([], judged=not self._failed, unsourced_number=unsourced)
        ranked = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
        best = scores[ranked[0]]
        close = [i for i in ranked[: defaults.ATTRIBUTION_MAX_PASSAGES]
                 if scores[i] >= defaults.ATTRIBUTION_MIN_SCORE and scores[i] >= best - defaults.ATTRIBUTION_MARGIN]
        if not close:
            return Verdict([], judged=True, unsourced_number=unsourced)
        # Overlap is not support: a passage stating another number or the opposite is never cited
        supported, opposite = await asyncio.to_thread(self._weigh, sentence, [self._passages[i] for i in close])
        return Verdict(supported, judged=True, opposite=opposite, unsourced_number=unsourced)

    @staticmethod
    def _weigh(sentence: str, close: list[Passage]) -> tuple[list[str], tuple[str, str] | None]:
        """The close passages that support the sentence, and the first vetoed one's sentence saying its opposite."""
        supported: list[str] = []
        opposite: tuple[str, str] | None = None
        for passage in close:
            if not contradicts(sentence, passage.text, content_tokens):
                supported.append(passage.alias)
            elif opposite is None and (said := stated_opposite(sentence, passage.text, content_tokens)):
                opposite = (passage.alias, said)
        return supported, opposite

    async def _scores(self, claim: str, tokens: frozenset[str]) -> list[float] | None:
        """Evidence of `claim` in each passage; None when no passage can reach the bar (or the embedder failed)."""
        assert self._tokens is not None
        lexical = [len(tokens & passage) / len(tokens) for passage in self._tokens]
        if evidence_score(max(lexical), 1.0) < defaults.ATTRIBUTION_MIN_SCORE:
            return None  # not even a perfect embedding match would lift it: spare the model call
        similarities = await self._similarities(PUBLIC_TAG.sub(" ", claim).strip())
        if similarities is None:
            return None
        return [evidence_score(lex, sim) for lex, sim in zip(lexical, similarities, strict=True)]

    async def _quote_sources(self, sentence: str) -> list[str]:
        """The passages holding a short answer word for word, kept only where they also hold at
        least ATTRIBUTION_QUOTE_QUESTION_SHARE of the question's content words: "Jefferson County"
        stands in many passages, and a multi-hop distractor holds the wrong entity word for word;
        a passage that speaks of what was asked is the one that supports it as the answer."""
        quoted = self._quoted_in(sentence)
        asked = content_tokens(self._question) - question_words() if self._question else frozenset()
        if not quoted or not asked:
            return quoted
        assert self._tokens is not None
        share = {p.alias: len(asked & tokens) / len(asked) for p, tokens in zip(self._passages, self._tokens, strict=True)}
        return [alias for alias in quoted if share[alias] >= defaults.ATTRIBUTION_QUOTE_QUESTION_SHARE]

    def _quoted_in(self, sentence: str) -> list[str]:
        """Aliases of the passages that hold the short sentence word for word, in rank order."""
        phrase = _plain(PUBLIC_TAG.sub(" ", sentence)).strip(_QUOTE_TRIM)
        if len(phrase.replace(" ", "")) < defaults.ATTRIBUTION_QUOTE_MIN_CHARS:
            return []
        whole = re.compile(rf"(?<!\w){re.escape(phrase)}(?!\w)")
        found = [p.alias for p in self._passages if whole.search(_plain(p.text))]
        return found[: defaults.ATTRIBUTION_MAX_PASSAGES]

    async def tags(self, sentence: str) -> str:
        """The attributed tags that follow `sentence`; the unsupported mark when it was judged and
        no passage supports it (unless it claims nothing: "does not mention", "let me know"); else ""."""
        verdict = await self.verdict(sentence)
        tags = ""
        if verdict.aliases:
            tags = "".join(self.tag_for(alias) for alias in verdict.aliases)
        elif verdict.judged and not claims_nothing(sentence):
            tags = UNSUPPORTED_MARK
        if verdict.judged:
            self.judgements.append(Judgement(sentence, tags, verdict))
        return tags

    async def _similarities(self, sentence: str) -> list[float] | None:
        """Cosine of the sentence with every passage; None (and no more attempts) if the embedder fails."""
        try:
            if self._vectors is None:
                self._vectors = _unit(await self._embedder.embed_passages([p.text for p in self._passages]))
            query = _unit([await self._embedder.embed_query(sentence)])[0]
        except Exception as exc:  # any embedder failure: the answer goes on without attribution
            log.warning("attribution stopped for this answer: the embedder failed: %s", exc)
            self._failed = True
            return None
        return [float(value) for value in self._vectors @ query]


_QUOTE_TRIM = " .,;:!?\"'()[]«»“”‘’。，；：！？"


def _plain(text: str) -> str:
    """Lower case, whitespace collapsed: how a quote is compared with its passage."""
    return " ".join(text.lower().split())


def _unit(vectors: Sequence[Sequence[float]]) -> np.ndarray:
    matrix = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0.0, 1.0, norms)


def _is_prose(text: str, start: int, end: int) -> bool:
    """Whether the sentence `text[start:end]` is prose: not in or on a code fence, not a table row."""
    if len(_FENCE_LINE.findall(text, 0, start)) % 2 == 1 or _FENCE_LINE.search(text, start, end):
        return False
    line = text[text.rfind("\n", 0, end) + 1 : end]
    return not line.lstrip().startswith("|")


class AttributionStream:
    """Attributes one decoded answer as it streams: feed what the decoder gives, then `finish`.

    On an error or a cancelled task, `abandon` returns the held-back text without waiting for
    the embedder.
    """

    def __init__(self, attributor: Attributor) -> None:
        self._attributor = attributor
        self._text = ""  # the decoded answer so far
        self._shown = 0  # how much of it went out
        self._sentence = 0  # where the current sentence starts
        self._scan = 0  # where the sentence scan resumes

    async def feed(self, chunk: str) -> str:
        if not chunk:
            return ""
        self._text += chunk
        return await self._advance(final=False)

    async def finish(self, chunk: str = "") -> str:
        """The end of the answer: `chunk` (a decoder's flush) and the last sentence's tags."""
        self._text += chunk
        return await self._advance(final=True)

    def abandon(self, chunk: str = "") -> str:
        """Everything not yet shown, plus `chunk`, unattributed."""
        self._text += chunk
        rest, self._shown = self._text[self._shown :], len(self._text)
        self._sentence = self._scan = self._shown
        return rest

    async def _advance(self, *, final: bool) -> str:
        ends, decided = sentence_ends(self._text, self._scan, final=final)
        if final:
            ends.append(len(self._text))
        out: list[str] = []
        for end in ends:
            out.append(self._text[self._shown : end])
            out.append(await self._tags(self._sentence, end))
            self._shown = self._sentence = end
        out.append(self._text[self._shown : decided])
        self._shown = self._scan = decided
        return "".join(out)

    async def _tags(self, start: int, end: int) -> str:
        sentence = self._text[start:end]
        if not sentence.strip() or PUBLIC_TAG.search(sentence) or not _is_prose(self._text, start, end):
            return ""  # nothing said, cited by the model already, or code or a table
        return await self._attributor.tags(sentence)
