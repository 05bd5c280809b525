"""web_fetch: one web page's main text, by URL, behind the address guard, as a tool.

The seed's agent tool of the same name (web_fetch.go FetchURLContent): the fetcher the pipeline's
web_fetch stage uses (web/fetch.py), so the page is cut to WEB_FETCH_MAX_CONTENT_BYTES and every
connection, redirects included, goes through the SSRF guard (web/guard.py): a private, loopback or
link-local address is refused unless the settings allow it. The page becomes one web passage
registered in the answer's citation registry (wN), its URL as id and knowledge id.
"""

from __future__ import annotations

from typing import Any

from ragline import defaults
from ragline.contracts.passages import MatchType, SearchResult
from ragline.nodes.tools.base import AgentTool, ToolContext, ToolOutcome, passages_outcome
from ragline.web.fetch import FetchedPage
from ragline.web.guard import BlockedAddressError
from ragline.web.search import WEB_KNOWLEDGE_BASE_ID, WEB_SOURCE


def page_result(page: FetchedPage) -> SearchResult:
    """The page as a web search result (web/search.py to_search_results), its text as the content."""
    title = page.title or page.url
    metadata: dict[str, Any] = {"source": WEB_SOURCE, "url": page.url, "title": title, "web_fetched": True}
    if page.final_url != page.url:
        metadata["final_url"] = page.final_url
    return SearchResult(id=page.url, content=page.text, score=1.0, knowledge_id=page.url, knowledge_base_id=WEB_KNOWLEDGE_BASE_ID,
                        knowledge_title=title, match_type=MatchType.KEYWORD, metadata=metadata)


async def web_fetch(arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
    url = arguments.get("url")
    if not isinstance(url, str) or not url.strip():
        raise ValueError("web_fetch needs a url (http or https)")
    url = url.strip()
    if len(url) > defaults.AGENT_WEB_URL_CHARS:
        raise ValueError(f"the url is {len(url)} characters long; at most {defaults.AGENT_WEB_URL_CHARS} are fetched")
    async with context.services.web_fetcher() as fetcher:
        try:
            page = await fetcher.fetch(url)  # WebFetchError when the page fails, is not text or has none
        except BlockedAddressError as exc:
            raise ValueError(f"refused to fetch {url[:200]}: {exc} (only public web addresses are fetched)") from exc
    return passages_outcome(context, [page_result(page)])


WEB_FETCH = AgentTool(
    name="web_fetch",
    description="Read a web page's main text, by its URL or a web_search result's handle (wN). Returns the page as a passage "
                "with a handle (wN) to cite. Only public http(s) addresses are fetched.",
    parameters={"type": "object", "properties": {
        "url": {"type": "string", "maxLength": defaults.AGENT_WEB_URL_CHARS, "description": "The page's http(s) URL, or its wN handle."},
    }, "required": ["url"]},
    run=web_fetch,
)
