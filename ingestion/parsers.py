"""File parsers: txt, md, html, pdf, docx, csv, xlsx and json become Markdown-flavoured text.

Replaces the seed's docreader parsers for the formats Ragline accepts. Structure that the chunker
protects (headings, tables, code) is rendered as Markdown so one chunker serves every format.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from ragline.retrieval.errors import IngestionError

SUPPORTED = ("txt", "md", "markdown", "html", "htm", "pdf", "docx", "csv", "xlsx", "json")


@dataclass
class ParsedDocument:
    title: str
    text: str
    file_type: str


def decode_text(data: bytes) -> str:
    """UTF-8 (with or without BOM) first, then GB18030 for Chinese files, then Latin-1 (never fails)."""
    for encoding in ("utf-8-sig", "gb18030"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    return data.decode("latin-1")


def markdown_table(rows: list[list[Any]]) -> str:
    rows = [[_cell(c) for c in row] for row in rows if any(_cell(c) for c in row)]
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * width]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    return "" if value is None else str(value).replace("|", "\\|").replace("\n", " ").strip()


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


def parse_pdf(data: bytes) -> str:
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(data))
    return "\n\n".join((page.extract_text() or "").strip() for page in reader.pages).strip()


def parse_docx(data: bytes) -> str:
    """Paragraphs and tables in body order; "Heading N" styles become Markdown headings."""
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    document = docx.Document(io.BytesIO(data))
    parts: list[str] = []
    for element in document.element.body.iterchildren():
        if element.tag.endswith("}p"):
            para = Paragraph(element, document)
            style = para.style.name if para.style is not None else ""
            text = para.text.strip()
            if text and style.startswith("Heading") and style[-1:].isdigit():
                parts.append("#" * min(int(style[-1]), 6) + " " + text)
            elif text:
                parts.append(text)
        elif element.tag.endswith("}tbl"):
            table = Table(element, document)
            parts.append(markdown_table([[cell.text for cell in row.cells] for row in table.rows]))
    return "\n\n".join(p for p in parts if p)


def parse_csv(text: str) -> str:
    try:
        dialect = csv.Sniffer().sniff(text[:4096], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    return markdown_table(list(csv.reader(io.StringIO(text), dialect)))


def parse_xlsx(data: bytes) -> str:
    from openpyxl import load_workbook

    book = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    parts = []
    for sheet in book.worksheets:
        table = markdown_table([list(row) for row in sheet.iter_rows(values_only=True)])
        if table:
            parts.append(f"## {sheet.title}\n\n{table}")
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


def parse_bytes(data: bytes, file_type: str, name: str = "") -> ParsedDocument:
    kind = file_type.lower().lstrip(".")
    title = Path(name).stem if name else ""
    try:
        if kind in ("txt", "md", "markdown"):
            text = decode_text(data)
        elif kind in ("html", "htm"):
            html_title, text = parse_html(decode_text(data))
            title = html_title or title
        elif kind == "pdf":
            text = parse_pdf(data)
        elif kind == "docx":
            text = parse_docx(data)
        elif kind == "csv":
            text = parse_csv(decode_text(data))
        elif kind == "xlsx":
            text = parse_xlsx(data)
        elif kind == "json":
            text = parse_json(decode_text(data))
        else:
            raise IngestionError(f"unsupported file type '{kind}' (supported: {', '.join(SUPPORTED)})")
    except IngestionError:
        raise
    except Exception as exc:  # parser libraries raise their own types; the message is what matters
        raise IngestionError(f"cannot parse {name or kind}: {exc}") from exc
    return ParsedDocument(title=title, text=text.replace("\x00", ""), file_type="md" if kind == "markdown" else kind)


def parse_file(path: Path) -> ParsedDocument:
    if not path.is_file():
        raise IngestionError(f"{path} is not a readable file")
    return parse_bytes(path.read_bytes(), path.suffix, path.name)
