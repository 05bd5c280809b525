"""The web_search tool over a real provider client (SearXNG's JSON API served on loopback) and a real citation registry."""

from __future__ import annotations

import json
import urllib.parse

import pytest

from ragline import defaults
from ragline.citations import Registry
from ragline.nodes.tools.base import ToolContext
from ragline.nodes.tools.web_search import NO_WEB_RESULTS, WEB_SEARCH
from ragline.services import Services
from ragline.settings import Settings
from ragline.web.search import WebSearchError
from tests.web.conftest import Page, site  # noqa: F401 (fixtures)

RESULTS = {"results": [
    {"url": "https://example.org/eiffel", "title": "Eiffel Tower facts", "content": "The tower is 330 m tall."},
    {"url": "https://example.com/paris", "title": "Paris guide", "content": "x" * (defaults.AGENT_WEB_SNIPPET_CHARS + 500)},
]}


@pytest.fixture
def context(site, tmp_path) -> ToolContext:
    settings = Settings(data_dir=tmp_path, web_search_provider="searxng", web_search_searxng_url=site.url("/"))
    return ToolContext(Services(settings), "default", (), Registry())


def _asked(site) -> str:
    return urllib.parse.parse_qs(urllib.parse.urlsplit(site.hits[-1]).query)["q"][0]


async def test_results_become_cited_web_passages_with_the_url_as_id(site, context):
    site.pages["/search"] = Page(json.dumps(RESULTS), content_type="application/json")
    outcome = await WEB_SEARCH.run({"query": " eiffel tower height "}, context)
    assert _asked(site) == "eiffel tower height"
    assert [(s.chunk_id, s.knowledge_id, s.source, s.url, s.title) for s in outcome.sources] == [
        ("https://example.org/eiffel", "https://example.org/eiffel", "web_search", "https://example.org/eiffel", "Eiffel Tower facts"),
        ("https://example.com/paris", "https://example.com/paris", "web_search", "https://example.com/paris", "Paris guide")]
    assert '<page id="w1" title="Eiffel Tower facts" domain="example.org">' in outcome.content and "330 m tall" in outcome.content
    assert len(outcome.sources[1].content) == defaults.AGENT_WEB_SNIPPET_CHARS  # a provider's long text is cut
    assert outcome.summary == "2 passages: w1 Eiffel Tower facts, w2 Paris guide"
    # the answer cites them: a ref to w1 expands to the page's public tag
    assert context.registry.expand_text('Tall <ref id="w1"/>.') == 'Tall <web url="https://example.org/eiffel" title="Eiffel Tower facts"/>.'


async def test_a_long_query_is_cut_before_it_leaves_the_service(site, context):
    site.pages["/search"] = Page(json.dumps(RESULTS), content_type="application/json")
    await WEB_SEARCH.run({"query": "tower " * 200}, context)
    assert len(_asked(site)) == defaults.AGENT_WEB_QUERY_CHARS


async def test_no_result_is_said_plainly(site, context):
    site.pages["/search"] = Page(json.dumps({"results": []}), content_type="application/json")
    outcome = await WEB_SEARCH.run({"query": "nothing at all"}, context)
    assert (outcome.content, outcome.sources, outcome.summary) == (NO_WEB_RESULTS, [], "no passages")


async def test_a_failing_provider_is_the_calls_error(site, context):
    site.pages["/search"] = Page("down", status=503, content_type="text/plain")
    with pytest.raises(WebSearchError, match="searxng search failed"):
        await WEB_SEARCH.run({"query": "eiffel"}, context)


@pytest.mark.parametrize("arguments", [{}, {"query": "  "}, {"query": 3}])
async def test_a_missing_query_is_refused_before_any_search(site, context, arguments):
    with pytest.raises(ValueError, match="non-empty query"):
        await WEB_SEARCH.run(arguments, context)
    assert site.hits == []
