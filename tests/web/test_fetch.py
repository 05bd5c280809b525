import pytest

from ragline import defaults
from ragline.web.extract import extract_main_text
from ragline.web.fetch import WebFetcher, cut_utf8, fetch_url_content
from ragline.web.guard import AddressPolicy, WebFetchError
from tests.web.conftest import Page

ARTICLE = """<html><head><title>Eiffel Tower - Encyclopedia</title><script>var tracking = 1;</script></head>
<body>
  <nav><a href="/">Home</a> <a href="/about">About</a></nav>
  <header class="site-header">Encyclopedia of Everything</header>
  <div class="cookie-banner">We use cookies.</div>
  <article>
    <h1>The Eiffel Tower</h1>
    <p>The Eiffel Tower is a wrought-iron lattice tower on the <a href="/champ">Champ de Mars</a> in Paris.</p>
    <p>It was built from 1887 to 1889 by the company of Gustave Eiffel.</p>
  </article>
  <aside>Related: Louvre, Notre-Dame</aside>
  <footer>Copyright 2024 Encyclopedia</footer>
</body></html>"""

POLICY = AddressPolicy(allow_private=True)


def test_main_text_keeps_the_article_and_drops_menus_headers_footers_and_scripts():
    page = extract_main_text(ARTICLE)
    assert page.title == "Eiffel Tower - Encyclopedia"
    assert page.text.splitlines() == [
        "The Eiffel Tower",
        "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris.",
        "It was built from 1887 to 1889 by the company of Gustave Eiffel.",
    ]


def test_without_an_article_element_link_lists_and_boilerplate_classes_are_dropped():
    html = """<body><div id="menu"><a href="/a">A</a></div><ul><li><a href="/x">Tags</a></li><li><a href="/y">More tags</a></li></ul>
    <div class="content"><p>东京是日本的首都，也是世界上人口最多的都市圈之一。</p><p>Second paragraph with a <a href="/l">link</a> inside prose.</p></div>
    <div class="footer">Imprint</div></body>"""
    assert extract_main_text(html).text.splitlines() == [
        "东京是日本的首都，也是世界上人口最多的都市圈之一。",
        "Second paragraph with a link inside prose.",
    ]


def test_unclosed_tags_do_not_swallow_the_rest_of_the_page():
    assert extract_main_text("<body><p>one<p>two<div><span>three</div><p>four").text.splitlines() == ["one", "two", "three", "four"]


@pytest.mark.parametrize("text", ["a" * 9000, "é" * 5000, "日本" * 2000, "ab😀" * 2000])
def test_content_is_cut_to_8000_bytes_without_splitting_a_character(text):
    cut = cut_utf8(text)
    assert len(cut.encode("utf-8")) <= defaults.WEB_FETCH_MAX_CONTENT_BYTES
    assert text.startswith(cut) and len(cut.encode("utf-8")) > defaults.WEB_FETCH_MAX_CONTENT_BYTES - 4


async def test_fetch_extracts_the_main_text_of_a_page(site):
    site.pages["/tower"] = Page(ARTICLE)
    page = await fetch_url_content(site.url("/tower"), POLICY)
    assert page.text.startswith("The Eiffel Tower\n") and "Copyright" not in page.text and page.title.startswith("Eiffel")


async def test_fetch_cuts_a_long_page_to_8000_bytes(site):
    site.pages["/long"] = Page("<article>" + "<p>Über lange Texte, Absatz für Absatz.</p>" * 400 + "</article>")
    page = await fetch_url_content(site.url("/long"), POLICY)
    assert 7990 <= len(page.text.encode("utf-8")) <= 8000


async def test_fetch_follows_redirects_and_reports_the_final_url(site):
    site.pages["/old"] = Page("", status=301, headers={"Location": "/new"})
    site.pages["/new"] = Page("<p>Moved here.</p>")
    page = await fetch_url_content(site.url("/old"), POLICY)
    assert page.text == "Moved here." and page.final_url == site.url("/new")


async def test_fetch_decodes_the_charset_of_the_page(site):
    site.pages["/gbk"] = Page("<html><head><meta charset='gb18030'></head><body><p>北京欢迎你</p></body></html>".encode("gb18030"),
                              content_type="text/html")
    assert (await fetch_url_content(site.url("/gbk"), POLICY)).text == "北京欢迎你"


async def test_plain_text_pages_are_read_as_they_are(site):
    site.pages["/t.txt"] = Page("line one\n\n  line two  \n", content_type="text/plain; charset=utf-8")
    assert (await fetch_url_content(site.url("/t.txt"), POLICY)).text == "line one\nline two"


@pytest.mark.parametrize("page, message", [
    (Page("gone", status=404, content_type="text/plain"), "404"),
    (Page(b"%PDF-1.7", content_type="application/pdf"), "not a web page"),
    (Page("<script>only()</script>"), "no readable text"),
])
async def test_fetch_failures_are_web_fetch_errors(site, page, message):
    site.pages["/x"] = page
    with pytest.raises(WebFetchError, match=message):
        await fetch_url_content(site.url("/x"), POLICY)


async def test_a_slow_page_times_out(site):
    site.pages["/slow"] = Page("<p>late</p>", delay=1.0)
    async with WebFetcher(POLICY, timeout=0.2) as fetcher:
        with pytest.raises(WebFetchError, match="longer than"):
            await fetcher.fetch(site.url("/slow"))


@pytest.mark.parametrize("url", ["http://0177.0.0.1/", "http://exa\tmple.com/", "http://127.0.0.1:99999/", "http://[::1/"])
async def test_a_malformed_url_is_a_web_fetch_error_not_a_crash(url):
    async with WebFetcher(POLICY, timeout=2) as fetcher:
        with pytest.raises(WebFetchError):
            await fetcher.fetch(url)
