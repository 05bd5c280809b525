"""OCR in a child process: the same text as in-process, one child for a run of images, its memory
given back (it exits idle, or after a read that left it large), and a clear error when it dies."""

from __future__ import annotations

import io
import os
import signal
import threading

import pytest
from PIL import Image, ImageDraw, ImageFont

from ragline import defaults
from ragline.ingestion.isolated import resident_bytes
from ragline.ingestion.ocr import OcrEngine
from ragline.ingestion.ocr_process import OcrProcess
from ragline.retrieval.errors import DocumentTooLargeError, IngestionError
from tests.ingestion.image_fixtures import screenshot_png

SCREEN = ["Error E42: anemometer bearing worn", "Replace the bearing with part AB-7"]


def large_scan() -> bytes:
    """A 4,000 x 5,000 page with a few lines of text: rapidocr takes hundreds of MB to read it."""
    image = Image.new("RGB", (4_000, 5_000), "white")
    for i in range(6):
        ImageDraw.Draw(image).text((100, 80 + i * 700), f"Line {i}: the anemometer bearing", fill="black", font=ImageFont.load_default(size=40))
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def _pid(ocr: OcrProcess) -> int:
    return ocr._child.pid


def test_the_child_reads_what_the_engine_reads_and_serves_a_run_of_images():
    ocr = OcrProcess()
    try:
        assert ocr.read(screenshot_png(SCREEN)) == OcrEngine().read(screenshot_png(SCREEN))
        first = _pid(ocr)
        assert ocr.read(screenshot_png(["Second image"])) == "Second image" and _pid(ocr) == first
    finally:
        ocr.close()


def test_a_large_scan_leaves_the_servers_memory_where_it_was_and_a_large_child_exits(monkeypatch):
    scan = large_scan()
    ocr = OcrProcess()
    try:
        before = resident_bytes() / 2**20
        assert "anemometer" in ocr.read(scan)
        assert resident_bytes() / 2**20 - before < 50  # the same read in this process: +300 MB and more
        monkeypatch.setattr(defaults, "OCR_PROCESS_MAX_RSS_BYTES", 1)  # every read leaves the child "large"
        ocr.close()
        ocr.read(screenshot_png(SCREEN))
        child = ocr._child
        child.join(10)
        assert not child.is_alive() and child.exitcode == 0
        assert ocr.read(screenshot_png(["Again"])) == "Again"  # a fresh child
    finally:
        ocr.close()


def test_an_idle_child_exits_and_the_next_image_starts_another(monkeypatch):
    monkeypatch.setattr(defaults, "OCR_PROCESS_IDLE_S", 0.3)
    ocr = OcrProcess()
    try:
        ocr.read(screenshot_png(SCREEN))
        child = ocr._child
        child.join(10)
        assert not child.is_alive() and child.exitcode == 0
        assert ocr.read(screenshot_png(["Later"])) == "Later"
    finally:
        ocr.close()


def test_a_child_killed_mid_read_is_a_clear_error():
    ocr = OcrProcess()
    try:
        scan = large_scan()
        ocr.read(screenshot_png(SCREEN))
        threading.Timer(0.5, os.kill, (_pid(ocr), signal.SIGKILL)).start()  # the scan takes seconds to read
        with pytest.raises(IngestionError, match=r"an image \(OCR\): its parser was killed \(signal SIGKILL\)"):
            ocr.read(scan)
        assert ocr.read(screenshot_png(["After"])) == "After"
    finally:
        ocr.close()


def test_an_image_that_needs_more_than_the_memory_cap_fails_with_the_reason_and_the_next_image_is_read(monkeypatch):
    """The cap is the parse child's (ingestion/isolated.py), lowered here: the scan needs ~800 MB beyond the engine."""
    monkeypatch.setattr(defaults, "OCR_MEMORY_BYTES", 512 * 2**20)
    ocr = OcrProcess()
    try:
        with pytest.raises(DocumentTooLargeError) as refused:
            ocr.read(large_scan())
        assert str(refused.value) == "reading the image's text (OCR) needs more than 512 MB of memory"
        child = ocr._child
        child.join(10)
        assert not child.is_alive() and child.exitcode == 0  # it answered, then gave its memory back
        assert ocr.read(screenshot_png(SCREEN)) == "\n".join(SCREEN)  # a fresh child, under the same cap
    finally:
        ocr.close()
