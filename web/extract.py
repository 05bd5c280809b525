"""Main text of an HTML page: the article, without menus, banners, footers and scripts.

A small boilerplate remover on the standard library's HTML parser (no native dependency):
`<article>` / `<main>` (or role=main) wins when the page has one; navigation, headers, footers,
asides, forms and elements whose class or id names them are skipped; blocks that are mostly
link text (menus, tag clouds) are dropped. Lengths are counted in characters, not words, so
Chinese and Japanese pages are judged like English ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

_SKIP_TAGS = frozenset({"script", "style", "noscript", "template", "svg", "canvas", "iframe", "object",
                        "nav", "header", "footer", "aside", "form", "button", "select", "textarea", "dialog"})
_VOID_TAGS = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
                        "param", "source", "track", "wbr"})
_BLOCK_TAGS = frozenset({"p", "div", "section", "article", "main", "li", "ul", "ol", "dl", "dt", "dd", "tr",
                         "table", "blockquote", "pre", "h1", "h2", "h3", "h4", "h5", "h6", "br", "hr",
                         "figure", "figcaption", "details", "summary", "address", "td", "th"})
_SKIP_ROLES = frozenset({"navigation", "banner", "contentinfo", "complementary", "search", "menu", "menubar", "dialog"})
# class/id words of page furniture; matched as whole words so "navigation" matches but "canvas" does not
_BOILERPLATE = re.compile(
    r"(?:^|[\s_-])(nav|navbar|navigation|menu|footer|header|sidebar|breadcrumbs?|cookie|cookies|consent|"
    r"banner|advert|ads|share|social|related|comments?|subscribe|newsletter|popup|modal|skip-link)(?:$|[\s_-])",
    re.IGNORECASE,
)
_LINK_DENSITY_LIMIT = 0.5  # a block more than half link text is a menu or a tag cloud
_LINK_BLOCK_MAX_CHARS = 200  # ...unless it is long enough to be prose with many citations


@dataclass
class _Block:
    text: list[str] = field(default_factory=list)
    link_chars: int = 0

    def content(self) -> str:
        return " ".join("".join(self.text).split())


@dataclass
class _Region:
    """Blocks of the whole page or of one main-content element."""

    blocks: list[_Block] = field(default_factory=lambda: [_Block()])


class _MainTextParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title = ""
        self.page = _Region()
        self.main: _Region | None = None
        self._stack: list[tuple[str, bool]] = []  # (tag, opened the main region)
        self._skip_depth = 0
        self._in_main = False
        self._link_depth = 0
        self._in_title = False

    def _regions(self) -> list[_Region]:
        return [self.page, self.main] if self._in_main and self.main is not None else [self.page]

    def _break(self) -> None:
        for region in self._regions():
            if region.blocks[-1].text:
                region.blocks.append(_Block())

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = {k: v or "" for k, v in attrs}
        if tag == "title":
            self._in_title = True
        if tag in _VOID_TAGS:
            if tag in ("br", "hr") and not self._skip_depth:
                self._break()
            return
        skipped = self._skip_depth > 0 or self._is_boilerplate(tag, attr)
        opens_main = not skipped and self.main is None and (tag in ("article", "main") or attr.get("role") == "main")
        self._stack.append((tag, opens_main))
        if skipped:  # everything inside a skipped element is skipped; depth counts the open ones
            self._skip_depth += 1
            return
        if opens_main:
            self.main = _Region()
            self._in_main = True
        if tag == "a":
            self._link_depth += 1
        if tag in _BLOCK_TAGS:
            self._break()

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in _VOID_TAGS:
            return
        # close up to the matching open tag; browsers forgive unclosed tags, so must we
        for index in range(len(self._stack) - 1, -1, -1):
            if self._stack[index][0] == tag:
                for _ in range(len(self._stack) - index):
                    self._close(*self._stack.pop())
                return

    def _close(self, tag: str, opened_main: bool) -> None:
        if self._skip_depth:
            self._skip_depth -= 1
            return
        if tag == "a" and self._link_depth:
            self._link_depth -= 1
        if tag in _BLOCK_TAGS:
            self._break()
        if opened_main:
            self._in_main = False

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
            return
        if self._skip_depth:
            return
        for region in self._regions():
            block = region.blocks[-1]
            block.text.append(data)
            if self._link_depth:
                block.link_chars += len(data.strip())

    @staticmethod
    def _is_boilerplate(tag: str, attr: dict[str, str]) -> bool:
        if tag in _SKIP_TAGS or attr.get("role") in _SKIP_ROLES or "hidden" in attr or attr.get("aria-hidden") == "true":
            return True
        if tag in ("article", "main", "body", "html"):
            return False
        return bool(_BOILERPLATE.search(f"{attr.get('class', '')} {attr.get('id', '')}"))


def _keep(block: _Block, text: str) -> bool:
    if not text:
        return False
    dense = block.link_chars / max(len(text), 1) > _LINK_DENSITY_LIMIT
    return not (dense and len(text) < _LINK_BLOCK_MAX_CHARS)


def _render(region: _Region) -> str:
    lines = [text for block in region.blocks if _keep(block, text := block.content())]
    return "\n".join(lines)


@dataclass(frozen=True)
class ExtractedPage:
    title: str
    text: str


def extract_main_text(html: str) -> ExtractedPage:
    """The page title and its main text, one block per line."""
    parser = _MainTextParser()
    parser.feed(html)
    parser.close()
    main = _render(parser.main) if parser.main is not None else ""
    text = main if main.strip() else _render(parser.page)
    return ExtractedPage(title=" ".join(parser.title.split()), text=text)
