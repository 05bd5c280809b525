import json
import urllib.parse

import pytest

from ragline.contracts.passages import SearchResult
from ragline.settings import Settings
from ragline.web.search import (
    DuckDuckGoProvider,
    SearXNGProvider,
    WebSearchError,
    is_web_result,
    provider_from_settings,
    search_web,
)
from tests.web.conftest import Page


def _ddg_result(url: str, title: str, snippet: str) -> str:
    href = "//duckduckgo.com/l/?uddg=" + urllib.parse.quote(url, safe="") + "&rut=abc"
    return (f'<div class="result results_links web-result"><div class="links_main result__body">'
            f'<h2 class="result__title"><a rel="nofollow" class="result__a" href="{href}">{title}</a></h2>'
            f'<a class="result__snippet" href="{href}">{snippet}</a></div></div>')


DDG_PAGE = "<html><body><div id='links'>" + "".join([
    _ddg_result("https://example.org/eiffel", "Eiffel <b>Tower</b> facts", "The tower is <b>330 m</b> tall."),
    _ddg_result("https://example.com/paris?a=1&b=2", "Paris guide", "Visit Paris."),
    _ddg_result("https://example.org/eiffel", "Duplicate", "Same URL again."),
]) + "</div></body></html>"


async def test_duckduckgo_html_results_become_web_search_results(site):
    site.pages["/html/"] = Page(DDG_PAGE)
    results = await search_web("eiffel tower height", DuckDuckGoProvider(site.url("/html/")), max_results=5)
    assert [r.id for r in results] == ["https://example.org/eiffel", "https://example.com/paris?a=1&b=2"]
    first = results[0]
    assert isinstance(first, SearchResult) and is_web_result(first)
    assert (first.content, first.knowledge_id, first.knowledge_base_id, first.knowledge_title) == (
        "The tower is 330 m tall.", "https://example.org/eiffel", "web", "Eiffel Tower facts")
    assert first.metadata == {"source": "web_search", "url": "https://example.org/eiffel", "title": "Eiffel Tower facts"}
    assert results[0].score > results[1].score >= 0.5
    assert b"q=eiffel+tower+height" in site.bodies[-1]


async def test_searxng_json_results_become_web_search_results(site):
    payload = {"results": [
        {"url": "https://a.example/1", "title": "One", "content": "first snippet"},
        {"url": "javascript:alert(1)", "title": "bad"},
        {"url": "https://b.example/2", "title": "Two", "content": ""},
    ]}
    site.pages["/search"] = Page(json.dumps(payload), content_type="application/json")
    results = await search_web("q", SearXNGProvider(site.url("/")), max_results=1)
    assert [(r.id, r.content) for r in results] == [("https://a.example/1", "first snippet")]
    assert "format=json" in site.hits[-1]
    both = await search_web("q", SearXNGProvider(site.url("")), max_results=5)
    assert [r.content for r in both] == ["first snippet", "Two"]  # no snippet: the title stands in


@pytest.mark.parametrize("page", [Page("down", status=503, content_type="text/plain"), Page("not json", content_type="application/json"),
                                  Page('{"answers": []}', content_type="application/json")])
async def test_a_failing_provider_raises_web_search_error(site, page):
    site.pages["/search"] = page
    with pytest.raises(WebSearchError):
        await search_web("q", SearXNGProvider(site.url("")), max_results=5)


def test_the_default_provider_needs_no_key_and_searxng_needs_a_url(monkeypatch):
    assert provider_from_settings(Settings()).name == "duckduckgo"
    monkeypatch.setenv("RAGLINE_WEB_SEARCH_PROVIDER", "searxng")
    with pytest.raises(WebSearchError, match="SEARXNG_URL"):
        provider_from_settings(Settings())
    monkeypatch.setenv("RAGLINE_WEB_SEARCH_SEARXNG_URL", "http://127.0.0.1:9")
    assert provider_from_settings(Settings()).name == "searxng"


async def test_a_tenant_searches_with_its_own_provider_and_others_with_the_default(site):
    from ragline.web.search import WebSearch

    site.pages["/html/"] = Page(DDG_PAGE)
    site.pages["/acme/search"] = Page(json.dumps({"results": [{"url": "https://acme.example/a", "content": "acme hit"}]}),
                                      content_type="application/json")
    settings = Settings(web_search_duckduckgo_url=site.url("/html/"),
                        tenant_web_search={"acme": {"provider": "searxng", "searxng_url": site.url("/acme")}})
    web = WebSearch.from_settings(settings)
    assert [r.id for r in await web.search("q", "acme")] == ["https://acme.example/a"]
    assert [r.id for r in await web.search("q", "globex")][0] == "https://example.org/eiffel"
    assert [r.id for r in await web.search("q")][0] == "https://example.org/eiffel"


def test_a_tenant_choosing_searxng_without_an_instance_is_refused_at_search_time():
    settings = Settings(tenant_web_search={"acme": {"provider": "searxng"}})
    with pytest.raises(WebSearchError, match="searxng"):
        provider_from_settings(settings, "acme")
    assert isinstance(provider_from_settings(settings, "globex"), DuckDuckGoProvider)
