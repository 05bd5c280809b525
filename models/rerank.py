"""Rerank models through litellm (Cohere, Jina, Voyage, an OpenAI-compatible /rerank ...).

There is no local default: with no rerank model configured, the rerank stage keeps the search
scores. Callers treat any RerankError as "fall back to search results", as the seed does.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from ragline import defaults


class RerankError(RuntimeError):
    """The rerank model is missing, misconfigured, failed or timed out."""


@dataclass(frozen=True)
class RerankScore:
    index: int  # position in the documents passed in
    score: float


class Reranker:
    def __init__(self, model: str, api_base: str | None = None, api_key: str | None = None, timeout: float = defaults.RERANK_TIMEOUT_S) -> None:
        self.model = model
        self.api_base = api_base
        self.api_key = api_key
        self.timeout = timeout

    async def rerank(self, query: str, documents: list[str]) -> list[RerankScore]:
        """Scores for every document, best first."""
        if not documents:
            return []
        import litellm  # here, not at import: litellm costs seconds to import and the default has no reranker

        try:
            response = await asyncio.wait_for(
                litellm.arerank(
                    model=self.model,
                    query=query,
                    documents=documents,
                    top_n=len(documents),
                    api_base=self.api_base,
                    api_key=self.api_key,
                ),
                timeout=self.timeout,
            )
        except TimeoutError as exc:
            raise RerankError(f"rerank model {self.model} timed out after {self.timeout:.0f}s") from exc
        except Exception as exc:
            raise RerankError(f"rerank model {self.model} failed: {exc}") from exc
        results = response.results or []
        scores = [RerankScore(int(item["index"]), float(item["relevance_score"])) for item in results]
        return sorted(scores, key=lambda s: s.score, reverse=True)
