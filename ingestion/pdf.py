"""PDF pages into text: each page's lines, running headers and footers dropped, ruled tables as
Markdown tables, and where each page starts in the text (so a chunk can name its pages).

Replaces the seed's docreader PDF parser. pypdf's plain extraction keeps the reading order; its
layout extraction (text placed on a fixed-width grid) shows where columns line up. A block of
lines is turned into a table only when both agree: the layout shows at least three rows with the
same number of short cells whose columns line up, and the plain text holds exactly those rows,
one line each. Anything less regular (wrapped cells, merged cells, ragged rows) stays text:
a wrong table is worse than none.
"""

from __future__ import annotations

import io
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ragline import defaults
from ragline.ingestion.images import ImageCollector, markdown_reference, pdf_page_images
from ragline.ingestion.tables import markdown_table
from ragline.retrieval.errors import DocumentTooLargeError

PAGE_SEPARATOR = "\n\n"
_CELL = re.compile(r"\S+(?: \S+)*")  # a run of words with single spaces: layout cells are 2+ spaces apart
_DIGITS = re.compile(r"\d+")
_LIST_MARKER = re.compile(r"[•◦▪‣·*+–-]|\(?\d{1,3}[.)]|\(?[a-z][.)]")
_SENTENCE_END = set(".!?:;)|。！？；")


@dataclass
class PdfText:
    text: str
    page_starts: list[int]  # offset in `text` where page 1, 2, ... begins


def parse_pdf(data: bytes, name: str, take: Callable[[str], str], images: ImageCollector) -> PdfText:
    """Each page's text, then a Markdown reference to each image drawn on the page; `take` counts the
    text against the document's budget."""
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(data))
    if len(reader.pages) > defaults.DOCUMENT_MAX_PAGES:
        raise DocumentTooLargeError(f"{name} has {len(reader.pages):,} pages, more than {defaults.DOCUMENT_MAX_PAGES:,}")
    lines = drop_running_lines([page_lines(page, take) for page in reader.pages])  # refused as soon as the budget is passed
    parts: list[str] = []
    for number, (page, page_text) in enumerate(zip(reader.pages, lines), start=1):
        take("")  # no text, but a stopped parse ends here, between pages of the layout pass
        text = "\n".join(with_tables(page_text, layout_lines(page))).strip()
        refs = [markdown_reference(image) for image in pdf_page_images(page, number, images)]
        parts.append(PAGE_SEPARATOR.join(part for part in (text, *refs) if part))
    return join_pages(parts)


def join_pages(parts: list[str]) -> PdfText:
    """The pages' texts and where each starts (an empty page starts where the next one does). A
    page that ends mid-sentence runs on into the next with a line break, else a blank line
    separates them, so a sentence cut by a page break stays one paragraph for the chunker."""
    text, starts = "", []
    for part in parts:
        if text and part:
            text += PAGE_SEPARATOR if text.rstrip()[-1:] in _SENTENCE_END else "\n"
        starts.append(len(text))
        text += part
    return PdfText(text, starts)


def page_lines(page: Any, take: Callable[[str], str]) -> list[str]:
    return [line.rstrip() for line in take((page.extract_text() or "").replace("\x00", "")).split("\n")]


def layout_lines(page: Any) -> list[str]:
    """The page's text on pypdf's fixed-width grid (about 40 ms a page on top of the plain text)."""
    try:
        return (page.extract_text(extraction_mode="layout") or "").replace("\x00", "").split("\n")
    except Exception:  # layout mode is only a hint for tables: a page it cannot place keeps its plain text
        return []


def _running_key(line: str) -> str:
    """A line as it repeats from page to page: case and page numbers aside ("Page 3 of 12")."""
    return _DIGITS.sub("#", " ".join(line.split()).lower())


def drop_running_lines(pages: list[list[str]]) -> list[list[str]]:
    """Without the running headers and footers: a line among the first or last few of a page that
    recurs there (numbers aside) on most pages. Documents of fewer pages than
    PDF_RUNNING_MIN_PAGES keep every line: two pages cannot tell a header from a coincidence."""
    if len(pages) < defaults.PDF_RUNNING_MIN_PAGES:
        return pages
    depth = defaults.PDF_RUNNING_LINES
    edges = [_edges(page, depth) for page in pages]
    counts: Counter[str] = Counter(key for page, (top, bottom) in zip(pages, edges)
                                   for key in {_running_key(page[i]) for i in top + bottom})
    needed = defaults.PDF_RUNNING_PAGE_SHARE * len(pages)
    running = {key for key, count in counts.items() if count >= needed}  # "#": a bare page number
    out = []
    for page, (top, bottom) in zip(pages, edges):
        drop = {i for i in top + bottom if _running_key(page[i]) in running}
        out.append([line for i, line in enumerate(page) if i not in drop])
    return out


def _edges(page: list[str], depth: int) -> tuple[list[int], list[int]]:
    """Indexes of the first and last `depth` non-blank lines of a page."""
    filled = [i for i, line in enumerate(page) if line.strip()]
    return filled[:depth], filled[-depth:] if len(filled) > depth else []


def _cells(line: str) -> list[tuple[int, int, str]]:
    return [(m.start(), m.end(), m.group(0)) for m in _CELL.finditer(line)]


def _aligned(row: list[tuple[int, int, str]], head: list[tuple[int, int, str]]) -> bool:
    """Same number of cells, each starting or ending (right-aligned numbers) where the head's does."""
    slack = defaults.PDF_TABLE_COLUMN_SLACK
    return len(row) == len(head) and all(abs(a[0] - b[0]) <= slack or abs(a[1] - b[1]) <= slack for a, b in zip(row, head))


def _is_row(cells: list[tuple[int, int, str]]) -> bool:
    return 2 <= len(cells) <= defaults.PDF_TABLE_MAX_COLUMNS and all(len(c[2]) <= defaults.PDF_TABLE_CELL_MAX_CHARS for c in cells)


def layout_tables(layout: list[str]) -> list[list[list[str]]]:
    """Tables the layout shows: runs of at least PDF_TABLE_MIN_ROWS consecutive lines of aligned cells."""
    tables: list[list[list[str]]] = []
    block: list[list[tuple[int, int, str]]] = []
    for line in [*layout, ""]:
        cells = _cells(line)
        if block and _is_row(cells) and _aligned(cells, block[0]):
            block.append(cells)
            continue
        if len(block) >= defaults.PDF_TABLE_MIN_ROWS and not _list_or_code(rows := [[c[2] for c in row] for row in block]):
            tables.append(rows)
        block = [cells] if _is_row(cells) else []
    return tables


def _list_or_code(rows: list[list[str]]) -> bool:
    """Aligned lines that are no table: a bulleted or numbered list (the marker is its first
    "column"), or declarations whose lines (the last aside) end a column in "," or ";"."""
    first = [row[0] for row in rows]
    if all(_LIST_MARKER.fullmatch(cell) for cell in first):
        return True
    return any(sum(row[i][-1:] in ",;" for row in rows) >= len(rows) - 1 for i in range(len(rows[0])))


def with_tables(lines: list[str], layout: list[str]) -> list[str]:
    """The page's plain lines, each layout table whose rows appear there as consecutive lines
    replaced by a Markdown table (with blank lines around it, so the chunker sees a block)."""
    out = list(lines)
    for table in layout_tables(layout):
        flat = [" ".join(" ".join(row).split()) for row in table]
        squeezed = [" ".join(line.split()) for line in out]
        at = next((i for i in range(len(out) - len(flat) + 1) if squeezed[i : i + len(flat)] == flat), None)
        if at is not None:
            out[at : at + len(flat)] = ["", markdown_table(table), ""]
    return out
