"""An upload's parse in a child process: the same document and errors as in-process, a memory cap
that refuses what would swell the server, and a stop that kills the child at once."""

from __future__ import annotations

import io
import multiprocessing
import signal
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from ragline import defaults
from ragline.ingestion.isolated import death, parse_isolated
from ragline.ingestion.parsers import parse_bytes
from ragline.retrieval.errors import DocumentTooLargeError, IngestionError, ParsingStopped
from tests.ingestion.image_fixtures import chart_image, pdf_with_image
from tests.ingestion.pdf_fixtures import manual_pdf

_TYPES = ('<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
          '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
          '<Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" '
          'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>')
_RELS = ('<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
         '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" '
         'Target="word/document.xml"/></Relationships>')


def many_paragraphs_docx(paragraphs: int) -> bytes:
    """A small .docx of many short paragraphs, written as XML (python-docx needs minutes for this many)."""
    body = "<w:p><w:r><w:t>a b</w:t></w:r></w:p>" * paragraphs
    document = ('<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/'
                f'wordprocessingml/2006/main"><w:body>{body}</w:body></w:document>')
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", _TYPES)
        archive.writestr("_rels/.rels", _RELS)
        archive.writestr("word/document.xml", document)
    return out.getvalue()


def test_the_child_returns_what_an_in_process_parse_returns():
    for data, kind in ((manual_pdf(), "pdf"), (pdf_with_image("Quarterly report.", chart_image()), "pdf"),
                       (many_paragraphs_docx(20), "docx"), (b"q;a\nwhy;because\n", "csv")):
        assert parse_isolated(data, kind, f"doc.{kind}") == parse_bytes(data, kind, f"doc.{kind}")


def test_the_parsers_errors_keep_their_type_and_message_and_the_limits_reach_the_child(monkeypatch):
    with pytest.raises(IngestionError, match="unsupported file type 'exe'"):
        parse_isolated(b"MZ", "exe", "tool.exe")
    monkeypatch.setattr(defaults, "DOCUMENT_MAX_TEXT_CHARS", 1_000)  # changed here, after the fork server started
    with pytest.raises(DocumentTooLargeError, match="more than 1,000 characters"):
        parse_isolated(b"a" * 1001, "txt", "big.txt")


def test_a_parse_past_its_memory_cap_is_refused_saying_so(monkeypatch):
    data = many_paragraphs_docx(400_000)  # 38 KB zipped, 15 MB of XML: python-docx's tree needs hundreds of MB
    monkeypatch.setattr(defaults, "PARSE_MEMORY_BYTES", 96 * 2**20)
    with pytest.raises(DocumentTooLargeError, match="needs more than 96 MB of memory"):
        parse_isolated(data, "docx", "paragraphs.docx")


def test_a_stop_kills_the_child_at_once_and_leaves_no_process():
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    with pytest.raises(ParsingStopped, match="paragraphs.docx stopped"):
        parse_isolated(many_paragraphs_docx(150_000), "docx", "paragraphs.docx", stop)  # ~30 s to parse whole
    assert [child for child in multiprocessing.active_children() if child.name == "ragline-parse"] == []  # OCR children may idle


def test_a_child_that_dies_is_an_ingestion_error_naming_how():
    assert str(death(-signal.SIGSEGV, "x.pdf")) == "cannot parse x.pdf: its parser stopped (signal SIGSEGV)"
    killed = death(-signal.SIGKILL, "x.pdf")
    assert isinstance(killed, DocumentTooLargeError) and "most likely out of memory" in str(killed)


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended meanwhile
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _wait_until(condition: Callable[[], bool], timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def test_a_killed_server_takes_its_running_parse_along(tmp_path):
    (tmp_path / "slow.docx").write_bytes(many_paragraphs_docx(300_000))  # about a minute to parse whole
    script = ("import sys; from ragline.ingestion.isolated import parse_isolated\n"
              "if __name__ == '__main__': parse_isolated(open(sys.argv[1], 'rb').read(), 'docx', 'slow.docx')\n")
    (tmp_path / "server.py").write_text(script)
    server = subprocess.Popen([sys.executable, str(tmp_path / "server.py"), str(tmp_path / "slow.docx")])
    try:
        def parse_children() -> list[int]:
            return [child for fork_server in _children(server.pid) for child in _children(fork_server)]

        assert _wait_until(lambda: bool(parse_children())), "the parse never started"
        parses = parse_children()
        server.kill()
        gone = _wait_until(lambda: not any(Path(f"/proc/{pid}").exists() for pid in parses), timeout_s=15)
        assert gone, "the parse went on after its server was killed"
    finally:
        server.kill()
        server.wait()
