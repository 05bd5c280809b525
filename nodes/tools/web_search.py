"""web_search: a search of the web through the configured provider, as a tool.

The seed's agent tool of the same name (web_search.go, searchutil.ConvertWebSearchResults): the
provider the pipeline's web search uses (web/search.py, the tenant's own when it has one). Each
result becomes a web passage registered in the answer's one citation registry under a wN alias,
its URL as id and knowledge id, so the answer cites it and its references list the page. A
failing provider is the call's error; no result is said plainly.
"""

from __future__ import annotations

from typing import Any

from ragline import defaults
from ragline.contracts.passages import SearchResult
from ragline.nodes.tools.base import AgentTool, ToolContext, ToolOutcome, passages_outcome

NO_WEB_RESULTS = "The web search found nothing for the query. Try other words, or answer with what you have."


def _bounded(results: list[SearchResult]) -> list[SearchResult]:
    """Each snippet cut to AGENT_WEB_SNIPPET_CHARS: a provider decides how much text it sends."""
    return [r.model_copy(update={"content": r.content[: defaults.AGENT_WEB_SNIPPET_CHARS]}) for r in results]


async def web_search(arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ValueError("web_search needs a non-empty query")
    # raises WebSearchError ("duckduckgo search failed: ...") when the provider fails or is misconfigured
    results = await context.services.web_search.search(query.strip()[: defaults.AGENT_WEB_QUERY_CHARS], context.tenant_id)
    return passages_outcome(context, _bounded(results), NO_WEB_RESULTS)


WEB_SEARCH = AgentTool(
    name="web_search",
    description="Search the web. Returns result snippets with handles (wN) to cite; read a page in full with web_fetch when it is offered. "
                "Use it for what the knowledge bases cannot know (recent events, public facts).",
    parameters={"type": "object", "properties": {
        "query": {"type": "string", "maxLength": defaults.AGENT_WEB_QUERY_CHARS, "description": "What to search the web for."},
    }, "required": ["query"]},
    run=web_search,
)
