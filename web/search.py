"""Web search providers: DuckDuckGo's HTML page (no key, the default) and SearXNG's JSON API.

Replaces the seed's webSearchService + searchutil.ConvertWebSearchResults: a provider returns
`WebResult`s, which become the pipeline's `SearchResult` with the URL as id and knowledge id,
knowledge base "web" and metadata source=web_search, so rerank, merge and citations treat them as
web sources. Base URLs come from settings, so tests (and private deployments) point them anywhere;
a deployment may give a tenant its own provider (settings.tenant_web_search).
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Protocol

import httpx
from pydantic import BaseModel

from ragline import defaults
from ragline.contracts.passages import MatchType, SearchResult
from ragline.settings import Settings

WEB_KNOWLEDGE_BASE_ID = "web"
WEB_SOURCE = "web_search"


class WebSearchError(RuntimeError):
    """The provider failed or answered with something unreadable."""


class WebResult(BaseModel):
    url: str
    title: str = ""
    snippet: str = ""


def web_rank_score(rank: int, total: int) -> float:
    """Providers give no score: rank 0 maps to 1.0, the last rank to just above the floor."""
    if total <= 1:
        return 1.0
    return 1.0 - (1.0 - defaults.WEB_RESULT_MIN_RANK_SCORE) * rank / total


def to_search_results(results: list[WebResult]) -> list[SearchResult]:
    """searchutil.ConvertWebSearchResults: URL as id, the snippet as content."""
    return [
        SearchResult(
            id=result.url,
            content=result.snippet or result.title,
            score=web_rank_score(rank, len(results)),
            knowledge_id=result.url,
            knowledge_base_id=WEB_KNOWLEDGE_BASE_ID,
            knowledge_title=result.title,
            match_type=MatchType.KEYWORD,
            metadata={"source": WEB_SOURCE, "url": result.url, "title": result.title},
        )
        for rank, result in enumerate(results)
    ]


def is_web_result(result: SearchResult) -> bool:
    return result.metadata.get("source") == WEB_SOURCE


class WebSearchProvider(Protocol):
    name: str

    async def search(self, query: str, max_results: int) -> list[WebResult]: ...


class _DuckDuckGoParser(HTMLParser):
    """Result links (a.result__a) and snippets (.result__snippet) of html.duckduckgo.com."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.results: list[WebResult] = []
        self._field: str | None = None
        self._depth = 0
        self._buffer: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._field is not None:
            self._depth += 1
            return
        attr = {k: v or "" for k, v in attrs}
        classes = attr.get("class", "").split()
        if tag == "a" and "result__a" in classes:
            self.results.append(WebResult(url=_unwrap_redirect(attr.get("href", ""))))
            self._field, self._depth, self._buffer = "title", 0, []
        elif "result__snippet" in classes and self.results:
            self._field, self._depth, self._buffer = "snippet", 0, []

    def handle_endtag(self, tag: str) -> None:
        if self._field is None:
            return
        if self._depth:
            self._depth -= 1
            return
        text = " ".join("".join(self._buffer).split())
        setattr(self.results[-1], self._field, text)
        self._field = None

    def handle_data(self, data: str) -> None:
        if self._field is not None:
            self._buffer.append(data)


def _unwrap_redirect(href: str) -> str:
    """DuckDuckGo links go through //duckduckgo.com/l/?uddg=<target>; return the target."""
    parsed = urllib.parse.urlparse(href if "//" in href else f"https://duckduckgo.com{href}")
    if parsed.path.startswith("/l/"):
        target = urllib.parse.parse_qs(parsed.query).get("uddg")
        if target:
            return target[0]
    return href if not href.startswith("//") else f"https:{href}"


@dataclass
class DuckDuckGoProvider:
    """The HTML endpoint: a form POST, no key, no JavaScript."""

    base_url: str
    timeout: float = defaults.WEB_SEARCH_TIMEOUT_S
    name: str = "duckduckgo"

    async def search(self, query: str, max_results: int) -> list[WebResult]:
        try:
            async with httpx.AsyncClient(timeout=self.timeout, follow_redirects=True, headers=_HEADERS) as client:
                response = await client.post(self.base_url, data={"q": query, "kl": "wt-wt"})
                response.raise_for_status()
        except httpx.HTTPError as exc:
            raise WebSearchError(f"duckduckgo search failed: {exc}") from exc
        parser = _DuckDuckGoParser()
        parser.feed(response.text)
        results = [r for r in parser.results if r.url.startswith(("http://", "https://"))]
        return _unique(results)[:max_results]


@dataclass
class SearXNGProvider:
    """A SearXNG instance's /search?format=json (the instance must enable the json format)."""

    base_url: str
    timeout: float = defaults.WEB_SEARCH_TIMEOUT_S
    name: str = "searxng"

    async def search(self, query: str, max_results: int) -> list[WebResult]:
        url = self.base_url.rstrip("/") + "/search"
        try:
            async with httpx.AsyncClient(timeout=self.timeout, headers=_HEADERS) as client:
                response = await client.get(url, params={"q": query, "format": "json"})
                response.raise_for_status()
                payload = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise WebSearchError(f"searxng search failed: {exc}") from exc
        raw = payload.get("results") if isinstance(payload, dict) else None
        if not isinstance(raw, list):
            raise WebSearchError("searxng answered without a results list")
        results = [
            WebResult(url=str(item["url"]), title=str(item.get("title") or ""), snippet=str(item.get("content") or ""))
            for item in raw
            if isinstance(item, dict) and str(item.get("url", "")).startswith(("http://", "https://"))
        ]
        return _unique(results)[:max_results]


_HEADERS = {"User-Agent": "Mozilla/5.0 (compatible; Ragline)"}


def _unique(results: list[WebResult]) -> list[WebResult]:
    seen: set[str] = set()
    out = []
    for result in results:
        if result.url not in seen:
            seen.add(result.url)
            out.append(result)
    return out


def provider_from_settings(settings: Settings, tenant_id: str | None = None) -> WebSearchProvider:
    """The tenant's own provider when the deployment chose one for it, else the default one."""
    chosen = settings.tenant_web_search.get(tenant_id) if tenant_id is not None else None
    name = chosen.provider if chosen is not None else settings.web_search_provider
    searxng_url = (chosen.searxng_url if chosen is not None else None) or settings.web_search_searxng_url
    if name == "searxng":
        if not searxng_url:
            raise WebSearchError("web_search_provider=searxng needs RAGLINE_WEB_SEARCH_SEARXNG_URL (or the tenant's searxng_url)")
        return SearXNGProvider(searxng_url)
    if name == "duckduckgo":
        return DuckDuckGoProvider(settings.web_search_duckduckgo_url)
    raise WebSearchError(f"unknown web search provider {name!r}; choose duckduckgo or searxng")


async def search_web(query: str, provider: WebSearchProvider, max_results: int) -> list[SearchResult]:
    """searchWebIfEnabled: the provider's results as SearchResults (raises WebSearchError)."""
    return to_search_results(await provider.search(query, max_results))


@dataclass(frozen=True)
class WebSearch:
    """The configured provider and result count; a misconfigured provider fails at search time."""

    settings: Settings

    @classmethod
    def from_settings(cls, settings: Settings) -> WebSearch:
        return cls(settings)

    async def search(self, query: str, tenant_id: str | None = None) -> list[SearchResult]:
        """Search with the asking tenant's provider (the deployment's default for other tenants)."""
        return await search_web(query, provider_from_settings(self.settings, tenant_id), self.settings.web_search_max_results)
