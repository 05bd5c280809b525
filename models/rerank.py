"""Rerank models through litellm (Cohere, Jina, Voyage, an OpenAI-compatible /rerank ...).

There is no local default: with no rerank model configured, the rerank stage keeps the search
scores. Callers treat any RerankError as "fall back to search results", as the seed does: a
timeout (60 s by default, each try), a malformed reply, or a 429/5xx after the policy's retries.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from ragline import defaults
from ragline.models.retry import RetryPolicy, litellm_module, with_retries


class RerankError(RuntimeError):
    """The rerank model is missing, misconfigured, failed or timed out."""


@dataclass(frozen=True)
class RerankScore:
    index: int  # position in the documents passed in
    score: float


class Reranker:
    def __init__(self, model: str, api_base: str | None = None, api_key: str | None = None, timeout: float = defaults.RERANK_TIMEOUT_S,
                 retry: RetryPolicy = RetryPolicy()) -> None:
        self.model = model
        self.api_base = api_base
        self.api_key = api_key
        self.timeout = timeout
        self.retry = retry

    async def _call(self, query: str, documents: list[str]) -> Any:
        """One rerank call, bounded by the timeout (also when the provider's client ignores it)."""
        litellm = await litellm_module()
        call = litellm.arerank(model=self.model, query=query, documents=documents, top_n=len(documents),
                               api_base=self.api_base, api_key=self.api_key, timeout=self.timeout)
        return await asyncio.wait_for(call, timeout=self.timeout)

    async def rerank(self, query: str, documents: list[str]) -> list[RerankScore]:
        """Scores for every document, best first."""
        if not documents:
            return []
        try:
            response = await with_retries(lambda: self._call(query, documents), self.retry, f"rerank model {self.model}")
        except TimeoutError as exc:
            raise RerankError(f"rerank model {self.model} timed out after {self.timeout:.0f}s") from exc
        except Exception as exc:
            raise RerankError(f"rerank model {self.model} failed: {exc}") from exc
        try:
            scores = [RerankScore(int(item["index"]), float(item["relevance_score"])) for item in response.results or []]
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise RerankError(f"rerank model {self.model} returned a malformed reply: {exc}") from exc
        if any(not 0 <= s.index < len(documents) for s in scores):
            raise RerankError(f"rerank model {self.model} scored documents it was not given")
        return sorted(scores, key=lambda s: s.score, reverse=True)
