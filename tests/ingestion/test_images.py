"""Images in documents: extracted from PDF, DOCX and Markdown, uploaded alone, bounded, stored once,
read by offline OCR into image_ocr chunks (and captioned into image_caption chunks by a vision model)."""

from __future__ import annotations

import asyncio
import base64
import io
import threading
from pathlib import Path

import pytest
from PIL import Image, ImageDraw, ImageFont

from ragline import defaults
from ragline.contracts.passages import ChunkType
from ragline.ingestion.image_chunks import ImageIndexer, ImageReading, image_chunk_records
from ragline.ingestion.images import ImageStore, inspect_image
from ragline.ingestion.ocr import OcrEngine
from ragline.ingestion.parsers import parse_bytes
from ragline.ingestion.service import IngestionService, TextDocument
from ragline.models.chat import ChatClient
from ragline.retrieval.errors import DocumentTooLargeError, IngestionError
from ragline.retrieval.types import SearchParams
from tests.ingestion.image_fixtures import (
    bomb_png,
    chart_image,
    docx_with_image,
    large_png,
    pdf_with_image,
    png_of,
    screenshot_png,
)
from tests.scripted_model import Reply

SCREEN = ["Error E42: anemometer bearing worn", "Replace the bearing with part AB-7"]


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode()


def converted(png: bytes, fmt: str) -> bytes:
    out = io.BytesIO()
    Image.open(io.BytesIO(png)).convert("RGB").save(out, fmt)
    return out.getvalue()


# --- extraction ---


def test_a_pdf_image_is_extracted_and_referenced_on_its_page():
    parsed = parse_bytes(pdf_with_image("Quarterly report of the Aurora station.", chart_image()), "pdf", "report.pdf")
    [image] = parsed.images
    assert (image.ext, image.width, image.height, image.origin) == ("png", 640, 400, "page 1")
    assert parsed.text == f"Quarterly report of the Aurora station.\n\n![]({image.url})"


def test_a_docx_picture_is_extracted_after_its_paragraph():
    parsed = parse_bytes(docx_with_image("The wiring diagram:", png_of(chart_image("Wiring"))), "docx", "w.docx")
    [image] = parsed.images
    assert parsed.text.startswith("The wiring diagram:") and parsed.text.endswith(f"![]({image.url})")


def test_markdown_data_uris_are_stored_and_remote_images_are_left_unfetched():
    remote = "![logo](https://example.com/logo.png) ![local](diagram.png)"
    text = f"# Notes\n\n![shot]({data_uri(screenshot_png(SCREEN))})\n\n{remote}"
    parsed = parse_bytes(text.encode(), "md", "notes.md")
    [image] = parsed.images
    assert parsed.text == f"# Notes\n\n![shot]({image.url})\n\n{remote}"  # no base64 left to chunk or embed


def test_a_repeated_image_is_kept_once():
    uri = data_uri(png_of(chart_image()))
    parsed = parse_bytes(f"![a]({uri}) and again ![b]({uri})".encode(), "md", "twice.md")
    assert len(parsed.images) == 1 and parsed.text.count(parsed.images[0].url) == 2


def test_images_past_the_per_document_limit_are_counted_not_read(monkeypatch):
    monkeypatch.setattr(defaults, "IMAGES_MAX_PER_DOCUMENT", 2)
    text = " ".join(f"![{i}]({data_uri(png_of(chart_image(f'Chart {i}')))})" for i in range(3))
    parsed = parse_bytes(text.encode(), "md", "three.md")
    assert (len(parsed.images), parsed.images_skipped) == (2, 1)
    assert parsed.text.endswith(" 2")  # the refused image leaves its alt text, not a dead link


@pytest.mark.parametrize("fmt, ext", [("PNG", "png"), ("JPEG", "jpg"), ("WEBP", "webp"), ("GIF", "gif")])
def test_standalone_images_are_accepted_in_the_seeds_formats(fmt, ext):
    parsed = parse_bytes(converted(screenshot_png(SCREEN), fmt), ext, f"shot.{ext}")
    assert parsed.text == "" and parsed.images[0].ext == ext and parsed.file_type == ext


def test_garbage_with_an_image_extension_is_refused():
    with pytest.raises(IngestionError, match="not a PNG, JPEG, WebP or GIF image"):
        parse_bytes(b"%PDF-1.4 this is not a picture" * 10, "png", "fake.png")


def test_an_image_type_outside_the_seeds_set_is_refused():
    with pytest.raises(IngestionError, match="BMP image"):
        parse_bytes(converted(screenshot_png(SCREEN), "BMP"), "png", "really-a.bmp.png")


def test_an_image_over_the_byte_bound_is_refused(monkeypatch):
    monkeypatch.setattr(defaults, "IMAGE_MAX_BYTES", 1000)
    with pytest.raises(DocumentTooLargeError, match="for one image"):
        parse_bytes(screenshot_png(SCREEN), "png", "big.png")


def test_too_many_pixels_are_refused_from_the_header_without_decoding(monkeypatch):
    def no_decoding(self):
        raise AssertionError("pixels were decoded")

    monkeypatch.setattr("PIL.ImageFile.ImageFile.load", no_decoding)
    png = large_png(6000, 6000)  # 36 M pixels in a few KB
    assert len(png) < 100_000
    with pytest.raises(DocumentTooLargeError, match="6,000 x 6,000 pixels"):
        parse_bytes(png, "png", "wide.png")
    with pytest.raises(DocumentTooLargeError, match="pixels"):
        parse_bytes(bomb_png(), "png", "bomb.png")


def test_a_bomb_inside_a_pdf_is_skipped_before_pypdf_decodes_it_and_the_text_kept(monkeypatch):
    import pypdf.generic._image_xobject as xobject

    decoded = []
    real = xobject._xobj_to_image
    monkeypatch.setattr(xobject, "_xobj_to_image", lambda obj: decoded.append(obj) or real(obj))
    monkeypatch.setattr(defaults, "IMAGE_MAX_PIXELS", 640 * 400 - 1)
    parsed = parse_bytes(pdf_with_image("Text survives.", chart_image()), "pdf", "r.pdf")
    assert (parsed.images, parsed.images_skipped, parsed.text) == ([], 1, "Text survives.")
    assert decoded == []


# --- storage, OCR, chunks ---


def test_images_are_stored_once_under_their_content_address(tmp_path):
    store = ImageStore(tmp_path)
    image = inspect_image(screenshot_png(SCREEN), "shot.png")
    first, second = store.save(image), store.save(image)
    assert first == second == tmp_path / f"{image.sha256}.png" and first.read_bytes() == image.data
    assert store.path_of(image.url) == first
    assert store.path_of("local://images/../../etc/passwd") is None and store.path_of("https://x/y.png") is None


def test_ocr_reads_the_screenshot_offline_and_is_bounded(monkeypatch):
    engine = OcrEngine()
    assert engine.read(screenshot_png(SCREEN)) == "\n".join(SCREEN)
    monkeypatch.setattr(defaults, "IMAGE_OCR_MAX_CHARS", 9)
    assert engine.read(screenshot_png(SCREEN)) == "Error E42"


def test_an_image_with_no_text_makes_no_chunk_and_a_long_one_is_cut_like_text():
    image = inspect_image(screenshot_png(SCREEN), "shot.png")
    assert image_chunk_records([ImageReading(image, "")], [], 64, "kb", "doc") == []
    long_text = " ".join(["bearing"] * 30)
    chunks = image_chunk_records([ImageReading(image, long_text, caption="A settings screen")], [], 64, "kb", "doc", "Shot")
    kinds = [c.chunk_type for c in chunks]
    assert kinds[-1] == ChunkType.IMAGE_CAPTION and set(kinds[:-1]) == {ChunkType.IMAGE_OCR} and len(kinds) > 2
    assert all(len(c.content) <= 64 for c in chunks[:-1])
    info = chunks[0].metadata["images"][0]
    assert info["url"] == image.url and info["ocr_text"] == chunks[0].content and info["caption"] == "A settings screen"


# --- through the ingestion service ---


@pytest.fixture
def image_ingestion(stack, tmp_path) -> IngestionService:
    return IngestionService(stack, images=ImageIndexer(ImageStore(tmp_path / "images")))


def _upload(name: str, data: bytes) -> TextDocument:
    parsed = parse_bytes(data, Path(name).suffix, name)
    return TextDocument.parsed(parsed, parsed.title, f"upload:{name}")


async def test_a_screenshot_and_a_pdf_chart_become_searchable_image_chunks(stack, image_ingestion, tmp_path):
    kb = stack.knowledge_bases.create("images")
    pdf = _upload("report.pdf", pdf_with_image("Quarterly report of the Aurora station.", chart_image()))
    shot = _upload("error-screen.png", screenshot_png(SCREEN))
    report, screen = await image_ingestion.ingest_documents(kb.id, [pdf, shot])
    chunks = stack.catalog.chunks_of(screen.id)
    assert [c.chunk_type for c in chunks] == [ChunkType.IMAGE_OCR]
    assert chunks[0].content == "\n".join(SCREEN) and chunks[0].metadata["images"][0]["url"] == shot.images[0].url
    assert (tmp_path / "images" / f"{shot.images[0].sha256}.png").is_file()
    chart = [c for c in stack.catalog.chunks_of(report.id) if c.chunk_type == ChunkType.IMAGE_OCR]
    text = next(c for c in stack.catalog.chunks_of(report.id) if c.chunk_type == ChunkType.TEXT)
    assert chart and "Monthly rainfall" in chart[0].content and chart[0].metadata["text_chunk_id"] == text.id
    assert (chart[0].metadata["pages"], chart[0].metadata["start"]) == ([1], text.metadata["start"])  # where the image stands
    assert report.metadata["images"] == 1
    hits = await stack.searcher.search(SearchParams(query="What does error E42 mean?", knowledge_base_ids=[kb.id]))
    assert hits[0].chunk_type == ChunkType.IMAGE_OCR and hits[0].knowledge_id == screen.id


async def test_a_scanned_page_keeps_its_image_reference_for_context_but_searches_only_the_image_text(stack, image_ingestion):
    kb = stack.knowledge_bases.create("scan")
    [scan] = await image_ingestion.ingest_documents(kb.id, [_upload("scan.pdf", pdf_with_image("", chart_image()))])
    by_type = {c.chunk_type: c for c in stack.catalog.chunks_of(scan.id)}
    assert not by_type[ChunkType.TEXT].indexed and by_type[ChunkType.IMAGE_OCR].indexed
    assert by_type[ChunkType.IMAGE_OCR].metadata["text_chunk_id"] == by_type[ChunkType.TEXT].id
    assert scan.chunk_count == 1


async def test_an_image_with_no_text_and_no_vision_model_is_refused(stack, image_ingestion):
    kb = stack.knowledge_bases.create("blank")
    blank = _upload("blank.png", png_of(Image.new("RGB", (300, 200), "white")))
    with pytest.raises(IngestionError, match="no vision model"):
        await image_ingestion.ingest_documents(kb.id, [blank])
    assert stack.catalog.list_knowledge(kb.id) == []


async def test_reparse_keeps_the_image_chunks(stack, image_ingestion):
    kb = stack.knowledge_bases.create("reparse")
    [report] = await image_ingestion.ingest_documents(kb.id, [_upload("r.pdf", pdf_with_image("Rain report.", chart_image()))])
    before = [(c.id, c.content) for c in stack.catalog.chunks_of(report.id) if c.chunk_type == ChunkType.IMAGE_OCR]
    await image_ingestion.reparse(kb.id, report.id)
    after = [(c.id, c.content) for c in stack.catalog.chunks_of(report.id) if c.chunk_type == ChunkType.IMAGE_OCR]
    assert [text for _, text in after] == [text for _, text in before] and "Monthly rainfall" in after[0][1]
    assert {i for i, _ in after}.isdisjoint(i for i, _ in before)  # fresh ids: the old rows are deleted after the swap
    hits = await stack.searcher.search(SearchParams(query="monthly rainfall", knowledge_base_ids=[kb.id]))
    assert after[0][0] in [h.id for h in hits]


async def test_a_vision_model_adds_a_caption_chunk_and_ocr_still_indexes(stack, tmp_path, scripted_server):
    scripted_server.reset()
    scripted_server.on(lambda body: "image_url" in str(body["messages"]), Reply.text("A bar chart of monthly rainfall peaking in April."))
    vision = ChatClient("openai/scripted-vision", scripted_server.base_url, "scripted-key")
    service = IngestionService(stack, images=ImageIndexer(ImageStore(tmp_path / "images"), vision=vision))
    kb = stack.knowledge_bases.create("captions")
    [doc] = await service.ingest_documents(kb.id, [_upload("chart.png", png_of(chart_image()))])
    kinds = {c.chunk_type: c for c in stack.catalog.chunks_of(doc.id)}
    assert kinds[ChunkType.IMAGE_CAPTION].content == "A bar chart of monthly rainfall peaking in April."
    assert kinds[ChunkType.IMAGE_OCR].metadata["images"][0]["caption"] == kinds[ChunkType.IMAGE_CAPTION].content
    sent = scripted_server.requests[-1]["messages"][0]["content"][1]["image_url"]["url"]
    assert sent.startswith("data:image/png;base64,")


async def test_a_failing_vision_model_leaves_ocr_alone(stack, tmp_path, scripted_server):
    scripted_server.reset()
    scripted_server.on(lambda body: True, Reply(status=500))
    vision = ChatClient("openai/scripted-vision", scripted_server.base_url, "scripted-key")
    service = IngestionService(stack, images=ImageIndexer(ImageStore(tmp_path / "images"), vision=vision))
    kb = stack.knowledge_bases.create("no-captions")
    [doc] = await service.ingest_documents(kb.id, [_upload("shot.png", screenshot_png(SCREEN))])
    assert [c.chunk_type for c in stack.catalog.chunks_of(doc.id)] == [ChunkType.IMAGE_OCR]


class SlowOcr(OcrEngine):
    """Counts reads and blocks each one until released: a stand-in for a long OCR."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.release = threading.Event()

    def read(self, data: bytes) -> str:
        self.reads += 1
        self.release.wait(5)
        return "text"


async def test_a_cancelled_ingestion_stops_between_images(stack, tmp_path):
    ocr = SlowOcr()
    service = IngestionService(stack, images=ImageIndexer(ImageStore(tmp_path / "images"), ocr=ocr))
    kb = stack.knowledge_bases.create("cancel")
    text = " ".join(f"![{i}]({data_uri(png_of(chart_image(f'Chart {i}')))})" for i in range(3))
    task = asyncio.create_task(service.ingest_documents(kb.id, [_upload("three.md", text.encode())]))
    while ocr.reads == 0:
        await asyncio.sleep(0.01)
    task.cancel()
    ocr.release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.1)
    assert ocr.reads == 1 and stack.catalog.list_knowledge(kb.id) == []



def test_ocr_reads_a_huge_image_scaled_down_and_a_scaled_screenshot_still_reads(monkeypatch):
    engine = OcrEngine()
    seen: list[tuple[int, ...]] = []
    engine._engine = lambda pixels: (seen.append(pixels.shape), ([], None))[1]  # what the detector is handed
    engine.read(large_png(6_000, 3_000))  # 18 M pixels: each full-size copy OCR makes would be 54-72 MB
    assert seen == [(2_048, 4_096, 3)]
    monkeypatch.setattr(defaults, "IMAGE_OCR_DECODE_MAX_SIDE", 900)
    big = Image.new("RGB", (1_800, 520), "white")  # the screenshot drawn at twice its size
    for i, line in enumerate(SCREEN):
        ImageDraw.Draw(big).text((48, 60 + i * 120), line, fill="black", font=ImageFont.load_default(size=60))
    assert OcrEngine().read(png_of(big)).replace(" ", "") == "\n".join(SCREEN).replace(" ", "")  # read, word spacing aside
