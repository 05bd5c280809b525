import io
import json
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragline import defaults
from ragline.ingestion.parsers import (
    decode_text,
    markdown_table,
    parse_bytes,
    parse_file,
)
from ragline.retrieval.errors import DocumentTooLargeError, IngestionError, ParsingStopped


def tiny_pdf(text: str) -> bytes:
    """A one-page PDF with a Helvetica text line, offsets computed so pypdf reads it strictly."""
    stream = f"BT /F1 24 Tf 72 700 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


def test_pdf_text_is_extracted():
    assert "Hello PDF world" in parse_bytes(tiny_pdf("Hello PDF world"), "pdf", "a.pdf").text


def test_docx_headings_become_markdown_and_tables_stay_tables():
    import docx

    document = docx.Document()
    document.add_heading("Installation", level=2)
    document.add_paragraph("Run the installer.")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "os", "command"
    table.cell(1, 0).text, table.cell(1, 1).text = "linux", "apt install"
    buffer = io.BytesIO()
    document.save(buffer)
    text = parse_bytes(buffer.getvalue(), "docx", "guide.docx").text
    assert text.startswith("## Installation\n\nRun the installer.")
    assert "| os | command |\n|---|---|\n| linux | apt install |" in text


def test_xlsx_sheets_become_tables_under_their_names():
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    sheet.title = "Prices"
    sheet.append(["item", "price"])
    sheet.append(["tea", 3.5])
    buffer = io.BytesIO()
    book.save(buffer)
    assert parse_bytes(buffer.getvalue(), "xlsx").text == "## Prices\n\n| item | price |\n|---|---|\n| tea | 3.5 |"


def test_html_keeps_headings_lists_tables_and_drops_scripts():
    html = ("<html><head><title>Doc</title><script>var x=1;</script></head><body><h1>Top</h1><p>Hello"
            " <b>world</b></p><ul><li>one</li></ul><table><tr><th>a</th></tr><tr><td>1</td></tr></table></body></html>")
    parsed = parse_bytes(html.encode(), "html", "page.html")
    assert parsed.title == "Doc"
    assert "var x" not in parsed.text
    assert "# Top" in parsed.text and "Hello world" in parsed.text and "- one" in parsed.text
    assert "| a |\n|---|\n| 1 |" in parsed.text


def test_csv_becomes_a_markdown_table_with_the_sniffed_delimiter():
    assert parse_bytes(b"name;city\nAda;London\n", "csv").text == "| name | city |\n|---|---|\n| Ada | London |"


def test_json_records_become_key_value_paragraphs():
    data = json.dumps([{"q": "Why?", "a": "Because."}, {"q": "当然", "a": ["x", 1]}], ensure_ascii=False)
    assert parse_bytes(data.encode(), "json").text == 'q: Why?\na: Because.\n\nq: 当然\na: ["x", 1]'


def test_gb18030_text_is_decoded():
    assert decode_text("中文文档".encode("gb18030")) == "中文文档"


def test_unsupported_types_and_broken_files_raise_ingestion_errors(tmp_path):
    with pytest.raises(IngestionError, match="unsupported file type"):
        parse_bytes(b"x", "exe")
    with pytest.raises(IngestionError, match="cannot parse"):
        parse_bytes(b"not a zip", "docx", "broken.docx")
    with pytest.raises(IngestionError, match="not a readable file"):
        parse_file(tmp_path / "missing.txt")


@given(st.lists(st.lists(st.text(max_size=12), min_size=1, max_size=4), min_size=1, max_size=6))
@settings(max_examples=60, deadline=None)
def test_markdown_tables_have_one_line_per_nonempty_row_and_equal_columns(rows):
    table = markdown_table(rows)
    kept = [r for r in rows if any(c.replace("\n", " ").strip() for c in r)]
    if not kept:
        assert table == ""
        return
    lines = table.split("\n")
    assert len(lines) == len(kept) + 1
    pipes = {line.replace("\\|", "").count("|") for line in lines}
    assert len(pipes) == 1


# --- hostile files: bounded before they cost memory or time (issue 13) ---


def _zip_bomb(unpacked_mb: int) -> bytes:
    """A .docx-shaped zip whose one entry unpacks to `unpacked_mb` MB of zeros (a few hundred KB packed)."""
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive, archive.open("word/document.xml", "w") as entry:
        for _ in range(unpacked_mb):
            entry.write(b"\0" * 2**20)
    return out.getvalue()


def test_a_docx_that_unpacks_to_hundreds_of_megabytes_is_refused_before_parsing():
    bomb = _zip_bomb(defaults.ARCHIVE_MAX_UNPACKED_BYTES // 2**20 + 1)
    assert len(bomb) < 2**20
    with pytest.raises(DocumentTooLargeError, match="unpacks to"):
        parse_bytes(bomb, ".docx", "bomb.docx")


def test_a_sheet_beyond_the_row_limit_is_refused(monkeypatch):
    from openpyxl import Workbook

    monkeypatch.setattr(defaults, "DOCUMENT_MAX_ROWS", 50)
    book = Workbook()
    for i in range(51):
        book.active.append([i, f"row {i}"])
    data = io.BytesIO()
    book.save(data)
    with pytest.raises(DocumentTooLargeError, match="more than 50 rows"):
        parse_bytes(data.getvalue(), ".xlsx", "rows.xlsx")
    with pytest.raises(DocumentTooLargeError, match="more than 50 rows"):
        parse_bytes("\n".join(f"{i},x" for i in range(51)).encode(), ".csv", "rows.csv")
    assert "row 49" in parse_bytes("\n".join(f"{i},row {i}" for i in range(50)).encode(), ".csv", "ok.csv").text


def test_text_beyond_the_character_limit_is_refused_not_cut(monkeypatch):
    monkeypatch.setattr(defaults, "DOCUMENT_MAX_TEXT_CHARS", 1000)
    assert parse_bytes(b"a" * 1000, ".txt", "edge.txt").text == "a" * 1000
    with pytest.raises(DocumentTooLargeError, match="1,000 characters"):
        parse_bytes(b"a" * 1001, ".txt", "big.txt")


@pytest.mark.parametrize("data", [b"", b"   \n\t  "])
def test_an_empty_text_file_is_refused(data):
    with pytest.raises(IngestionError, match="holds no text"):
        parse_bytes(data, ".txt", "empty.txt")


def test_random_bytes_named_txt_are_refused_as_binary():
    import random

    noise = random.Random(7).randbytes(200_000)
    with pytest.raises(IngestionError, match="does not look like text"):
        parse_bytes(noise, ".txt", "noise.txt")


def test_chinese_and_accented_text_is_text():
    assert parse_bytes("天气站的电池可用两年。Café crème.".encode("gb18030"), ".txt", "zh.txt").text.startswith("天气站")


def test_a_json_file_nested_too_deeply_is_a_clear_error():
    with pytest.raises(IngestionError, match="nests too deeply|cannot parse"):
        parse_bytes(b"[" * 100_000 + b"]" * 100_000, ".json", "deep.json")


class StopAfter(threading.Event):
    """A stop event that another thread sets after the parse has checked it `checks` times."""

    def __init__(self, checks: int) -> None:
        super().__init__()
        self.checks, self.seen = checks, 0

    def is_set(self) -> bool:
        self.seen += 1
        return self.seen > self.checks


@pytest.mark.parametrize("kind", ["docx", "pdf"])
def test_a_stopped_parse_ends_at_its_next_piece_of_text_not_at_the_files_end(kind):
    import docx

    if kind == "docx":
        document = docx.Document()
        for index in range(200):
            document.add_paragraph(f"Paragraph {index} of a long manual.")
        buffer = io.BytesIO()
        document.save(buffer)
        data = buffer.getvalue()
    else:
        data = tiny_pdf("One page of a long manual")
    stop = StopAfter(checks=1)
    with pytest.raises(ParsingStopped, match="its ingestion was cancelled"):
        parse_bytes(data, kind, f"long.{kind}", stop)
    assert stop.seen == 2  # checked once per piece: it stopped at the second, never reading the rest
    assert parse_bytes(data, kind, f"long.{kind}", threading.Event()).text  # unstopped, the same file parses
