import pytest

from ragline.contracts.passages import SearchResult
from ragline.contracts.request import PipelineRequest
from ragline.nodes.web_fetch import web_fetch
from ragline.settings import get_settings
from ragline.web.search import WebResult, to_search_results
from tests.nodes.helpers import node_runtime
from tests.web.conftest import LocalSite, Page, allow_private, site  # noqa: F401 (fixtures)


def _request(**kwargs):
    options = {"query": "q", "web_search_enabled": True, "web_fetch_enabled": True, **kwargs}
    return PipelineRequest(**options)


def _kb_hit(i: int) -> SearchResult:
    return SearchResult(id=f"c{i}", content=f"kb chunk {i}", score=0.9, knowledge_id="k", knowledge_base_id="kb")


def _web_hits(site: LocalSite, paths: list[str]) -> list[SearchResult]:
    return to_search_results([WebResult(url=site.url(p), title=p, snippet=f"snippet {p}") for p in paths])


async def test_web_fetch_replaces_the_snippets_of_the_top_n_web_results(site, allow_private):
    for name in ("a", "b", "c", "d"):
        site.pages[f"/{name}"] = Page(f"<article><p>Full page {name}.</p></article>")
    web = _web_hits(site, ["/a", "/b", "/c", "/d"])
    results = [_kb_hit(0), web[0], web[1], _kb_hit(1), web[2], web[3]]
    update = await web_fetch({"request": _request(), "rerank_results": results}, node_runtime())
    contents = [r.content for r in update["rerank_results"]]
    assert contents == ["kb chunk 0", "Full page a.", "Full page b.", "kb chunk 1", "Full page c.", "snippet /d"]
    assert sorted(site.hits) == ["/a", "/b", "/c"]  # default top-N is 3
    assert update["rerank_results"][1].metadata["snippet"] == "snippet /a"


async def test_web_fetch_top_n_comes_from_the_request(site, allow_private):
    site.pages["/a"] = Page("<p>A.</p>")
    site.pages["/b"] = Page("<p>B.</p>")
    update = await web_fetch({"request": _request(web_fetch_top_n=1), "rerank_results": _web_hits(site, ["/a", "/b"])}, node_runtime())
    assert [r.content for r in update["rerank_results"]] == ["A.", "snippet /b"]


async def test_a_failing_page_keeps_its_snippet(site, allow_private):
    site.pages["/ok"] = Page("<p>Fetched.</p>")
    site.pages["/bad"] = Page("boom", status=500, content_type="text/plain")
    update = await web_fetch({"request": _request(), "rerank_results": _web_hits(site, ["/bad", "/ok", "/missing"])}, node_runtime())
    fetched = update["rerank_results"]
    assert [r.content for r in fetched] == ["snippet /bad", "Fetched.", "snippet /missing"]
    assert "500" in fetched[0].metadata["web_fetch_error"]


async def test_a_refused_address_keeps_its_snippet_when_private_addresses_are_not_allowed(site):
    get_settings.cache_clear()
    site.pages["/a"] = Page("<p>internal</p>")
    update = await web_fetch({"request": _request(), "rerank_results": _web_hits(site, ["/a"])}, node_runtime())
    assert update["rerank_results"][0].content == "snippet /a" and site.hits == []


@pytest.mark.parametrize("options", [{"web_fetch_enabled": False}, {"web_search_enabled": False}, {"web_fetch_top_n": 0}])
async def test_web_fetch_runs_only_when_web_fetch_and_web_search_are_enabled(site, allow_private, options):
    site.pages["/a"] = Page("<p>A.</p>")
    assert await web_fetch({"request": _request(**options), "rerank_results": _web_hits(site, ["/a"])}, node_runtime()) == {}
    assert site.hits == []


async def test_web_fetch_without_web_results_changes_nothing(allow_private):
    assert await web_fetch({"request": _request(), "rerank_results": [_kb_hit(0)]}, node_runtime()) == {}


async def test_a_malformed_web_result_url_costs_only_its_page(site, allow_private):
    site.pages["/ok"] = Page("<article><p>Good page text.</p></article>")
    bad = _web_hits(site, ["/x"])[0]
    bad = bad.model_copy(update={"id": "http://0177.0.0.1/", "metadata": {**bad.metadata, "url": "http://exa\tmple.com:99999/"}})
    update = await web_fetch({"request": _request(), "rerank_results": [bad, *_web_hits(site, ["/ok"])]}, node_runtime())
    results = update["rerank_results"]
    assert results[0].content == bad.content and "web_fetch_error" in results[0].metadata
    assert results[1].content == "Good page text."
