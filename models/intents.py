"""The intent of a first-turn question without a generation call: nearest labelled exemplars.

With no conversation there is nothing to rewrite, and the rewrite call of query_understand costs
seconds on a small local model (its prompt alone is ~190 tokens). Its other output, the intent,
decides one thing on a first turn: whether to search. So a first-turn text question is embedded
(the search embeds it anyway, and the embedder caches vectors) and compared with embedded
exemplars of each intent. Searching is the safe default: a question is only taken for small talk
when it is clearly closer to small-talk exemplars than to any question exemplar. The accuracy on
a labelled set, next to the LLM's, is printed by benchmarks/intent_accuracy.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ragline import defaults
from ragline.contracts.state import QueryIntent
from ragline.models.embeddings import Embedder

# English and Chinese, as the sample knowledge base and the shared evaluation sets.
EXEMPLARS: dict[str, tuple[str, ...]] = {
    QueryIntent.GREETING: (
        "hi", "hello", "hello there", "hey", "good morning", "good evening", "hi, how are you?",
        "thanks, bye", "thank you!", "goodbye", "你好", "您好", "早上好", "谢谢", "再见", "嗨",
    ),
    QueryIntent.CHITCHAT: (
        "who are you?", "what can you do?", "are you a robot?", "tell me a joke", "how is your day going?",
        "what is your name?", "I am bored", "you are great", "ok", "nice", "cool, thanks",
        "你是谁", "你能做什么", "讲个笑话", "你叫什么名字", "好的",
    ),
    QueryIntent.WEB_SEARCH: (
        "what is the latest news today?", "what is the weather forecast for tomorrow in Berlin?",
        "current price of bitcoin", "who won the match last night?", "search the web for recent reviews",
        "今天有什么新闻", "明天北京天气怎么样", "最新的比特币价格",
    ),
    QueryIntent.KB_SEARCH: (
        "how do I reset the device?", "what does the manual say about the battery?", "how long does pairing take?",
        "what is the warranty period?", "which networks are supported?", "why does the display show dashes?",
        "what is the accuracy of the humidity sensor?", "how many parts are in the kit?",
        "when was the company founded?", "who wrote the report?", "what year did the war end?",
        "how many people live in the city?", "what is the capital of France?", "explain how the forecast works",
        "summarize the document", "what are the steps to install it?", "compare the two models",
        "battery", "warranty", "pairing", "installation guide", "error codes", "price", "specifications",
        "original", "report", "Paris", "1998", "电池", "保修", "安装",
        "如何重置设备", "保修期是多久", "电池能用多久", "这份文档讲了什么", "第一次世界大战是哪一年结束的",
    ),
}


@dataclass(frozen=True)
class IntentGuess:
    intent: str
    score: float  # best similarity to the chosen intent's exemplars
    margin: float  # how far it beat the best question exemplar (0 for a search)


class ExemplarIntents:
    """Embedded exemplars of one embedder; built once per host, on first use."""

    def __init__(self, embedder: Embedder, exemplars: dict[str, tuple[str, ...]] = EXEMPLARS) -> None:
        self._embedder = embedder
        self._labels = [label for label, texts in exemplars.items() for _ in texts]
        self._texts = [text for texts in exemplars.values() for text in texts]
        self._matrix: np.ndarray | None = None
        self._lock = asyncio.Lock()

    async def _vectors(self) -> np.ndarray:
        async with self._lock:
            if self._matrix is None:
                # as queries: the user's question is embedded as a query, and like is compared with like
                rows = await self._embedder.embed_queries(self._texts)
                self._matrix = _normalised(np.asarray(rows, dtype=np.float32))
        return self._matrix

    async def classify(self, question: str, *, web_search: bool) -> IntentGuess:
        """The intent of a first-turn question; kb_search unless small talk is clearly closer."""
        matrix = await self._vectors()
        query = _normalised(np.asarray([await self._embedder.embed_query(question)], dtype=np.float32))[0]
        best: dict[str, float] = {}
        for label, similarity in zip(self._labels, (matrix @ query).tolist(), strict=True):
            best[label] = max(best.get(label, -1.0), similarity)
        return decide(best, web_search=web_search)


def decide(best: dict[str, float], *, web_search: bool,
           margin: float = defaults.INTENT_EXEMPLAR_MARGIN, floor: float = defaults.INTENT_EXEMPLAR_MIN_SCORE) -> IntentGuess:
    """The rule, apart from the embedding: another intent must beat every question exemplar by `margin`."""
    search = best.get(QueryIntent.KB_SEARCH, 0.0)
    candidates: Sequence[str] = (QueryIntent.GREETING, QueryIntent.CHITCHAT) + ((QueryIntent.WEB_SEARCH,) if web_search else ())
    label = max(candidates, key=lambda name: best.get(name, -1.0))
    score = best.get(label, -1.0)
    if score >= floor and score - search >= margin:
        return IntentGuess(str(label), score, score - search)
    return IntentGuess(QueryIntent.KB_SEARCH.value, search, 0.0)


def _normalised(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1, norms)
