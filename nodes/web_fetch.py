"""web_fetch: the full text of the best web hits after rerank (seed: web_fetch.go, PluginWebFetch).

Runs only when web fetch and web search are both on. The first `web_fetch_top_n` web results
of the rerank output are fetched in parallel; each page's main text (cut to 8000 bytes) replaces
the search snippet. A page that fails, is refused by the address guard or has no text keeps its
snippet, so fetching never loses a result. Placed after rerank so that only pages that made
the cut cost a download.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from langgraph.runtime import Runtime

from ragline.contracts.context import RunContext
from ragline.contracts.passages import SearchResult
from ragline.contracts.request import PipelineRequest
from ragline.contracts.state import PipelineState
from ragline.services import services_of
from ragline.web.fetch import WebFetcher
from ragline.web.guard import WebFetchError
from ragline.web.search import is_web_result

log = logging.getLogger(__name__)


def should_fetch(request: PipelineRequest) -> bool:
    """The seed's condition: WebFetchEnabled && WebSearchEnabled, and something to fetch."""
    return request.web_fetch_enabled and request.web_search_enabled and request.web_fetch_top_n > 0


async def _fetched(fetcher: WebFetcher, result: SearchResult) -> SearchResult:
    url = str(result.metadata.get("url") or result.id)
    try:
        page = await fetcher.fetch(url)
    except WebFetchError as exc:  # includes refused addresses and malformed URLs
        log.info("web_fetch kept the snippet of %s: %s", url, exc)
        return result.model_copy(update={"metadata": {**result.metadata, "web_fetch_error": str(exc)}})
    except Exception as exc:  # one bad search result costs its page, never the answer
        log.warning("web_fetch kept the snippet of %s after an unexpected failure: %r", url, exc)
        return result.model_copy(update={"metadata": {**result.metadata, "web_fetch_error": str(exc)}})
    metadata = {**result.metadata, "web_fetched": True, "snippet": result.content}
    if page.final_url != url:
        metadata["final_url"] = page.final_url
    return result.model_copy(update={"content": page.text, "metadata": metadata})


async def fetch_top_web_results(results: list[SearchResult], top_n: int, fetcher: WebFetcher) -> list[SearchResult]:
    """The same list, with the first top_n web results' content replaced by their pages."""
    targets = [i for i, r in enumerate(results) if isinstance(r, SearchResult) and is_web_result(r)][:top_n]
    pages = await asyncio.gather(*(_fetched(fetcher, results[i]) for i in targets))
    out = list(results)
    for index, page in zip(targets, pages):
        out[index] = page
    return out


async def web_fetch(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Replace the snippets of the top-N web results in `rerank_results` by their pages' main text.

    Reads request.web_fetch_enabled / web_search_enabled / web_fetch_top_n and rerank_results;
    writes rerank_results (same order, same length). Does nothing when fetching is off.
    """
    request = state["request"]
    results = list(state.get("rerank_results") or [])
    if not should_fetch(request) or not any(isinstance(r, SearchResult) and is_web_result(r) for r in results):
        return {}
    async with services_of(runtime).web_fetcher() as fetcher:
        return {"rerank_results": await fetch_top_web_results(results, request.web_fetch_top_n, fetcher)}
