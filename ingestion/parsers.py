"""File parsers: txt, md, html, pdf, docx, csv, xlsx and json become Markdown-flavoured text.

Replaces the seed's docreader parsers for the formats Ragline accepts. Structure that the chunker
protects (headings, tables, code) is rendered as Markdown so one chunker serves every format.
"""

from __future__ import annotations

import csv
import io
import json
import threading
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from ragline import defaults
from ragline.ingestion.images import (
    IMAGE_TYPES,
    ExtractedImage,
    ImageCollector,
    docx_paragraph_images,
    inspect_image,
    markdown_images,
    markdown_reference,
)
from ragline.ingestion.pdf import parse_pdf
from ragline.ingestion.tables import markdown_table
from ragline.retrieval.errors import DocumentTooLargeError, IngestionError, ParsingStopped

SUPPORTED = ("txt", "md", "markdown", "html", "htm", "pdf", "docx", "csv", "xlsx", "json", *IMAGE_TYPES)


@dataclass
class ParsedDocument:
    title: str
    text: str
    file_type: str
    images: list[ExtractedImage] = field(default_factory=list)  # referenced from `text` as local://images/... Markdown
    images_skipped: int = 0  # embedded images refused (broken, too large) or past IMAGES_MAX_PER_DOCUMENT
    page_starts: list[int] = field(default_factory=list)  # a PDF: offset in `text` where each page begins


def decode_text(data: bytes) -> str:
    """UTF-8 (with or without BOM) first, then GB18030 for Chinese files, then Latin-1 (never fails)."""
    for encoding in ("utf-8-sig", "gb18030"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    return data.decode("latin-1")


class _HtmlToMarkdown(HTMLParser):
    _BLOCKS = {"p", "div", "section", "article", "br", "tr", "ul", "ol", "blockquote", "header", "footer"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.title = ""
        self._skip = 0
        self._in_title = False
        self._pre = False
        self._row: list[str] | None = None
        self._table: list[list[str]] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = dict(attrs)
        if tag in ("script", "style", "noscript"):
            self._skip += 1
        elif tag == "title":
            self._in_title = True
        elif tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            self.out.append("\n\n" + "#" * int(tag[1]) + " ")
        elif tag == "pre":
            self._pre = True
            self.out.append("\n\n```\n")
        elif tag == "li":
            self.out.append("\n- ")
        elif tag == "img":
            self.out.append(f"![{attr.get('alt') or ''}]({attr.get('src') or ''})")
        elif tag == "table":
            self._table = []
        elif tag == "tr" and self._table is not None:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
        elif tag in self._BLOCKS:
            self.out.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "noscript"):
            self._skip = max(0, self._skip - 1)
        elif tag == "title":
            self._in_title = False
        elif tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            self.out.append("\n\n")
        elif tag == "pre":
            self._pre = False
            self.out.append("\n```\n\n")
        elif tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._table is not None and self._row is not None:
            self._table.append(self._row)
            self._row = None
        elif tag == "table" and self._table is not None:
            self.out.append("\n\n" + markdown_table(self._table) + "\n\n")
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        if self._in_title:
            self.title += data.strip()
        elif self._cell is not None:
            self._cell.append(data)
        elif self._pre:
            self.out.append(data)
        else:
            self.out.append(" ".join(data.split()) + (" " if data[-1:].isspace() else ""))


def parse_html(text: str) -> tuple[str, str]:
    parser = _HtmlToMarkdown()
    parser.feed(text)
    parser.close()
    body = "\n".join(line.rstrip() for line in "".join(parser.out).split("\n"))
    while "\n\n\n" in body:
        body = body.replace("\n\n\n", "\n\n")
    return parser.title, body.strip()


class _TextBudget:
    """Counts extracted characters and refuses the document once it passes the limit; stops the
    parse at the next piece of text once `stop` is set (a cancelled job: its thread ends too)."""

    def __init__(self, name: str, stop: threading.Event | None = None) -> None:
        self.name, self.limit, self.used, self.stop = name, defaults.DOCUMENT_MAX_TEXT_CHARS, 0, stop

    def take(self, text: str) -> str:
        if self.stop is not None and self.stop.is_set():
            raise ParsingStopped(f"parsing {self.name} stopped: its ingestion was cancelled")
        self.used += len(text)
        if self.used > self.limit:
            raise DocumentTooLargeError(f"{self.name} holds more than {self.limit:,} characters of text; split it into smaller documents")
        return text


def check_archive(data: bytes, name: str) -> None:
    """A .docx or .xlsx is a zip: refuse one that unpacks to far more than it weighs (a decompression bomb)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            unpacked = sum(info.file_size for info in archive.infolist())
    except zipfile.BadZipFile as exc:
        raise IngestionError(f"cannot parse {name}: it is not a valid Office file ({exc})") from None
    if unpacked > defaults.ARCHIVE_MAX_UNPACKED_BYTES:
        raise DocumentTooLargeError(f"{name} unpacks to {unpacked // 2**20:,} MB, more than {defaults.ARCHIVE_MAX_UNPACKED_BYTES // 2**20} MB")


def check_text(text: str, name: str) -> None:
    """Refuse an empty file, and bytes that decoded to control characters (a binary file named .txt)."""
    if not text.strip():
        raise IngestionError(f"{name} holds no text")
    sample = text[:200_000]
    printable = sum(1 for c in sample if c.isprintable() or c in "\n\r\t")
    if printable < defaults.TEXT_MIN_PRINTABLE_SHARE * len(sample):
        share = 1 - printable / len(sample)
        raise IngestionError(f"{name} does not look like text ({share:.0%} control characters); upload it in its own format")


def parse_docx(data: bytes, budget: _TextBudget, images: ImageCollector) -> str:
    """Paragraphs and tables in body order; "Heading N" styles become Markdown headings; pictures
    become Markdown images after their paragraph's text."""
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    document = docx.Document(io.BytesIO(data))
    parts: list[str] = []
    for index, element in enumerate(document.element.body.iterchildren()):
        if element.tag.endswith("}p"):
            refs = [markdown_reference(image) for image in docx_paragraph_images(element, document.part, f"paragraph {index + 1}", images)]
            para = Paragraph(element, document)
            style = para.style.name if para.style is not None else ""
            text = para.text.strip()
            if text and style.startswith("Heading") and style[-1:].isdigit():
                parts.append(budget.take("#" * min(int(style[-1]), 6) + " " + text))
            elif text:
                parts.append(budget.take(text))
            parts.extend(refs)
        elif element.tag.endswith("}tbl"):
            table = Table(element, document)
            parts.append(budget.take(markdown_table(_bounded_rows(([cell.text for cell in row.cells] for row in table.rows), budget.name))))
    return "\n\n".join(p for p in parts if p)


def _bounded_rows(rows: Iterable[list[Any]], name: str, counted: list[int] | None = None) -> list[list[Any]]:
    """The rows, refused past DOCUMENT_MAX_ROWS (counted across the sheets of one file via `counted`)."""
    counter = counted if counted is not None else [0]
    out = []
    for row in rows:
        counter[0] += 1
        if counter[0] > defaults.DOCUMENT_MAX_ROWS:
            raise DocumentTooLargeError(f"{name} has more than {defaults.DOCUMENT_MAX_ROWS:,} rows")
        out.append(row)
    return out


def parse_csv(text: str, name: str = "the file") -> str:
    try:
        dialect = csv.Sniffer().sniff(text[:4096], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    return markdown_table(_bounded_rows(csv.reader(io.StringIO(text), dialect), name))


def parse_xlsx(data: bytes, budget: _TextBudget) -> str:
    from openpyxl import load_workbook

    book = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    parts, counted = [], [0]
    try:
        for sheet in book.worksheets:
            rows = _bounded_rows((list(row) for row in sheet.iter_rows(values_only=True)), budget.name, counted)
            table = markdown_table(rows)
            if table:
                parts.append(budget.take(f"## {sheet.title}\n\n{table}"))
    finally:
        book.close()
    return "\n\n".join(parts)


def parse_json(text: str) -> str:
    """A list of records becomes one "key: value" paragraph per record; anything else is pretty-printed."""
    value = json.loads(text)
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return "\n\n".join("\n".join(f"{k}: {_flat(v)}" for k, v in record.items()) for record in value)
    if isinstance(value, dict) and all(not isinstance(v, (dict, list)) for v in value.values()):
        return "\n".join(f"{k}: {_flat(v)}" for k, v in value.items())
    return "```json\n" + json.dumps(value, ensure_ascii=False, indent=2) + "\n```"


def _flat(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _decoded(data: bytes, name: str) -> str:
    text = decode_text(data)
    check_text(text, name)
    return text


def parse_bytes(data: bytes, file_type: str, name: str = "", stop: threading.Event | None = None) -> ParsedDocument:
    """The document's text, bounded: an empty, binary, oversized or bomb-like file is an IngestionError.
    Setting `stop` (from another thread) ends a long parse at its next piece of text (ParsingStopped)."""
    kind = file_type.lower().lstrip(".")
    title = Path(name).stem if name else ""
    label = name or f"the .{kind} file"
    budget = _TextBudget(label, stop)
    images = ImageCollector(label)
    page_starts: list[int] = []
    if kind in IMAGE_TYPES:  # a standalone image: refused outright when it is not one, or too large
        return ParsedDocument(title=title, text="", file_type=kind, images=[inspect_image(data, label, title, label)])
    try:
        if kind == "txt":
            text = _decoded(data, label)
        elif kind in ("md", "markdown"):
            text = markdown_images(_decoded(data, label), images)  # data: URIs out before the text budget counts them
        elif kind in ("html", "htm"):
            html_title, text = parse_html(_decoded(data, label))
            text, title = markdown_images(text, images), html_title or title
        elif kind == "pdf":
            pdf = parse_pdf(data, budget.name, budget.take, images)
            text, page_starts = pdf.text, pdf.page_starts
        elif kind == "docx":
            check_archive(data, label)
            text = parse_docx(data, budget, images)
        elif kind == "csv":
            text = parse_csv(_decoded(data, label), label)
        elif kind == "xlsx":
            check_archive(data, label)
            text = parse_xlsx(data, budget)
        elif kind == "json":
            text = parse_json(_decoded(data, label))
        else:
            raise IngestionError(f"unsupported file type '{kind}' (supported: {', '.join(SUPPORTED)})")
    except IngestionError:
        raise
    except RecursionError:
        raise IngestionError(f"cannot parse {label}: it nests too deeply") from None
    except Exception as exc:  # parser libraries raise their own types; the message is what matters
        raise IngestionError(f"cannot parse {label}: {exc}") from exc
    text = budget.take(text.replace("\x00", "")) if kind not in ("pdf", "docx", "xlsx") else text.replace("\x00", "")
    if not text.strip() and not images.images:
        raise IngestionError(f"{label} holds no text")
    return ParsedDocument(title=title, text=text, file_type="md" if kind == "markdown" else kind, images=images.images,
                          images_skipped=images.skipped, page_starts=page_starts)


def parse_file(path: Path) -> ParsedDocument:
    if not path.is_file():
        raise IngestionError(f"{path} is not a readable file")
    return parse_bytes(path.read_bytes(), path.suffix, path.name)
