"""The web_fetch tool: a page on loopback, fetched through the real guarded fetcher of the settings' services."""

from __future__ import annotations

import pytest

from ragline import defaults
from ragline.citations import Registry
from ragline.generation.citing import source_chunks
from ragline.nodes.tools.base import ToolContext
from ragline.nodes.tools.web_fetch import WEB_FETCH
from ragline.services import Services
from ragline.settings import Settings
from ragline.web.guard import WebFetchError
from ragline.web.search import WebResult, to_search_results
from tests.web.conftest import Page, site  # noqa: F401 (fixtures)

ARTICLE = """<html><head><title>Eiffel Tower - Encyclopedia</title></head><body><nav><a href="/">Home</a></nav>
<article><h1>The Eiffel Tower</h1><p>The Eiffel Tower is a wrought-iron lattice tower in Paris.</p><p>{more}</p></article>
<footer>Copyright 2024 Encyclopedia</footer></body></html>"""


def _context(tmp_path, **settings) -> ToolContext:
    return ToolContext(Services(Settings(data_dir=tmp_path, **settings)), "default", (), Registry())


async def test_a_loopback_page_is_refused_by_default_before_any_connection(site, tmp_path):
    site.pages["/tower"] = Page(ARTICLE.format(more=""))
    with pytest.raises(ValueError, match=r"refused to fetch http://127\.0\.0\.1:\d+/tower: 127\.0\.0\.1 is a loopback address"):
        await WEB_FETCH.run({"url": site.url("/tower")}, _context(tmp_path))
    assert site.hits == []


async def test_an_allowed_page_becomes_one_cited_web_passage_bounded_like_the_pipelines(site, tmp_path):
    site.pages["/tower"] = Page(ARTICLE.format(more="Built by Gustave Eiffel's company. " * 400))
    context = _context(tmp_path, web_fetch_allow_private=True)
    url = site.url("/tower")
    outcome = await WEB_FETCH.run({"url": f" {url} "}, context)
    [source] = outcome.sources
    assert (source.chunk_id, source.knowledge_id, source.url, source.title, source.source) == (
        url, url, url, "Eiffel Tower - Encyclopedia", "web_search")
    assert source.content.startswith("The Eiffel Tower\nThe Eiffel Tower is a wrought-iron") and "Copyright" not in source.content
    assert len(source.content.encode("utf-8")) <= defaults.WEB_FETCH_MAX_CONTENT_BYTES  # the fetcher's 8000-byte cut
    assert outcome.content.startswith('<web_search_results trust="untrusted">\n<page id="w1" title="Eiffel Tower - Encyclopedia"')
    assert outcome.summary == "1 passage: w1 Eiffel Tower - Encyclopedia"
    assert context.registry.expand_text('<ref id="w1"/>') == f'<web url="{url}" title="Eiffel Tower - Encyclopedia"/>'


async def test_a_page_without_a_title_is_named_by_its_url_and_a_redirect_is_noted(site, tmp_path):
    site.pages["/old"] = Page("", status=301, headers={"Location": "/notes"})
    site.pages["/notes"] = Page("first line\n\n second line ", content_type="text/plain")
    outcome = await WEB_FETCH.run({"url": site.url("/old")}, _context(tmp_path, web_fetch_allow_private=True))
    [source] = outcome.sources
    assert (source.title, source.content, source.metadata["final_url"]) == (site.url("/old"), "first line\nsecond line", site.url("/notes"))


async def test_a_search_results_handle_is_fetched_as_its_url(site, tmp_path):
    site.pages["/tower"] = Page(ARTICLE.format(more=""))
    context = _context(tmp_path, web_fetch_allow_private=True)
    context.registry.render_context(source_chunks(to_search_results([WebResult(url=site.url("/tower"), title="Tower")])))
    arguments = context.registry.decode_tool_arguments({"url": "w1"})  # as the agent graph decodes a call
    outcome = await WEB_FETCH.run(arguments, context)
    assert site.hits == ["/tower"] and context.registry.citable_alias(outcome.sources[0]) == "w1"


async def test_a_failing_page_is_the_calls_error(site, tmp_path):
    with pytest.raises(WebFetchError, match="404"):
        await WEB_FETCH.run({"url": site.url("/missing")}, _context(tmp_path, web_fetch_allow_private=True))


@pytest.mark.parametrize(("arguments", "error"), [({}, "needs a url"), ({"url": " "}, "needs a url"),
                                                  ({"url": "http://127.0.0.1/" + "a" * defaults.AGENT_WEB_URL_CHARS}, "at most 2048")])
async def test_a_missing_or_overlong_url_is_refused_before_any_fetch(site, tmp_path, arguments, error):
    with pytest.raises(ValueError, match=error):
        await WEB_FETCH.run(arguments, _context(tmp_path, web_fetch_allow_private=True))
    assert site.hits == []
