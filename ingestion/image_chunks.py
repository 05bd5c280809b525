"""A document's images become the seed's image chunks: `image_ocr` (offline) and `image_caption` (vision model).

Each image is stored once (content-addressed), read by OCR in a worker thread and, when a vision
model is configured, described by it. Its chunks carry the seed's ImageInfo in
`metadata["images"]` (url, caption, ocr_text), so reranking and the answer prompt show the image
with its text and a citation can point at it. They are self-contained passages: `parent_id`
stays empty (in Ragline a parent *replaces* a hit's content, which would hide the image's own
text); the text chunk the image stands in is linked as `metadata["text_chunk_id"]`.
An image with no text and no caption makes no text chunk. With a multimodal embedding model
(RAGLINE_IMAGE_EMBEDDING_MODEL) every image also gets an `image_vector` chunk: its description as
content, never keyword-indexed, found only through the image's own vector, which lives in the
image space of the KB's vector store (retrieval/image_recall.py), so a picture with no text at all
is still recallable.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ragline import defaults
from ragline.contracts.passages import ChunkType
from ragline.ingestion.chunker import chunk_text, embedding_text
from ragline.ingestion.ids import new_id
from ragline.ingestion.image_store import StoredImages
from ragline.ingestion.images import ExtractedImage
from ragline.ingestion.ocr import ImageReader
from ragline.ingestion.ocr_process import OcrProcess
from ragline.models.chat import ChatClient, ChatOptions
from ragline.models.embeddings import Embedder
from ragline.models.vision import vision_data_url
from ragline.retrieval.catalog import ChunkRecord
from ragline.retrieval.image_recall import image_space
from ragline.retrieval.locations import END, PAGES, START
from ragline.retrieval.tokenizer import keyword_tokens
from ragline.retrieval.vector_store import VectorRow

log = logging.getLogger(__name__)
IMAGE_CHUNK_TYPES = (ChunkType.IMAGE_OCR, ChunkType.IMAGE_CAPTION, ChunkType.IMAGE_VECTOR)
CAPTION_PROMPT = (
    "Describe this image from a document for a search index in one short paragraph: what it shows, "
    "and any numbers, labels or trends a reader would look for. Do not transcribe long text."
)
_MIME = {"png": "image/png", "jpg": "image/jpeg", "webp": "image/webp", "gif": "image/gif"}


@dataclass(frozen=True)
class ImageReading:
    image: ExtractedImage
    ocr_text: str
    caption: str = ""


class ImageIndexer:
    """Store, read and describe images; constructed once (the OCR engine loads on first use)."""

    def __init__(self, store: StoredImages, ocr: ImageReader | None = None, vision: ChatClient | None = None,
                 embedder: Embedder | None = None) -> None:
        self.store = store
        self.ocr = ocr or OcrProcess()  # its memory is given back between documents
        self.vision = vision
        self.embedder = embedder  # the multimodal embedding model; None: no image vectors

    def space(self, kb_id: str) -> str | None:
        """Where the KB's image vectors live in its vector store (None without a multimodal model)."""
        return image_space(kb_id, self.embedder.identity.key) if self.embedder else None

    async def vector_rows(self, chunks: Sequence[ChunkRecord]) -> list[VectorRow]:
        """The image vectors of `image_vector` chunks, read from the stored images (an image that is
        gone or cannot be sent gets no row: its text chunks still find it)."""
        if self.embedder is None:
            return []
        sources: list[tuple[ChunkRecord, str]] = []
        for chunk in (c for c in chunks if c.chunk_type == ChunkType.IMAGE_VECTOR):
            url = str((chunk.metadata.get("images") or [{}])[0].get("url", ""))
            data = await asyncio.to_thread(self.store.read, url)
            data_url = vision_data_url(data) if data is not None else None
            if data_url is not None:  # PNG/JPEG/WebP/GIF of at most 5 MB, as providers take images
                sources.append((chunk, data_url))
        vectors = await self.embedder.embed_images([u for _, u in sources]) if sources else []
        return [VectorRow(c.id, c.id, c.knowledge_id, v) for (c, _), v in zip(sources, vectors, strict=True)]

    @property
    def signature(self) -> str:
        """Part of a document's content hash: a new vision model re-reads unchanged documents."""
        return f"images:ocr:{self.vision.model if self.vision else ''}"

    async def read(self, image: ExtractedImage) -> ImageReading:
        """One image: stored, OCR'd off the event loop (a cancelled upload stops after this image)."""
        await asyncio.to_thread(self.store.save, image)
        ocr_text = await asyncio.to_thread(self.ocr.read, image.data)
        return ImageReading(image, ocr_text.strip(), await self.caption(image))

    async def caption(self, image: ExtractedImage) -> str:
        """The vision model's description, or "" without one or when it fails (OCR still indexes the image)."""
        if self.vision is None:
            return ""
        uri = f"data:{_MIME[image.ext]};base64,{base64.b64encode(image.data).decode()}"
        messages: list[dict[str, Any]] = [{"role": "user", "content": [
            {"type": "text", "text": CAPTION_PROMPT}, {"type": "image_url", "image_url": {"url": uri}},
        ]}]
        try:
            result = await asyncio.wait_for(self.vision.chat(messages, ChatOptions(temperature=0, max_tokens=defaults.IMAGE_CAPTION_MAX_TOKENS)),
                                            defaults.IMAGE_CAPTION_TIMEOUT_S)
        except Exception as exc:  # asyncio.CancelledError is not an Exception: a cancelled upload still stops
            log.warning("captioning %s with %s failed, OCR only: %s", image.url, self.vision.model, exc)
            return ""
        return result.content.strip()[: defaults.IMAGE_CAPTION_MAX_CHARS]

    async def chunks(self, images: Sequence[ExtractedImage], text_chunks: Sequence[ChunkRecord], chunk_size: int,
                     kb_id: str, knowledge_id: str, title: str) -> list[ChunkRecord]:
        """The image chunks of one document, numbered after its text chunks."""
        readings = [await self.read(image) for image in images]  # one at a time: OCR already fills the cores
        return image_chunk_records(readings, text_chunks, chunk_size, kb_id, knowledge_id, title, vectors=self.embedder is not None)


def image_info(reading: ImageReading, ocr_text: str) -> dict[str, Any]:
    """The seed's ImageInfo for one chunk (ocr_text: the part of the image's text this chunk holds)."""
    image = reading.image
    return {"url": image.url, "caption": reading.caption, "ocr_text": ocr_text, "width": image.width, "height": image.height,
            "origin": image.origin}


def anchor_of(url: str, text_chunks: Sequence[ChunkRecord]) -> ChunkRecord | None:
    """The first text chunk where the image's Markdown reference stands (parents are not searched)."""
    return next((c for c in text_chunks if c.chunk_type == ChunkType.TEXT and url in c.content), None)


def placed_at(anchor: ChunkRecord | None) -> dict[str, Any]:
    """An image's location is the text chunk it stands in: its pages and offsets (retrieval/locations.py)."""
    return {k: anchor.metadata[k] for k in (PAGES, START, END) if k in anchor.metadata} if anchor else {}


def image_chunk_records(readings: Sequence[ImageReading], text_chunks: Sequence[ChunkRecord], chunk_size: int,
                        kb_id: str, knowledge_id: str, title: str = "", vectors: bool = False) -> list[ChunkRecord]:
    """OCR text cut like any text (chunk_size), one caption chunk; empty readings make nothing,
    except the `image_vector` chunk every image gets when `vectors` (a multimodal model) is on."""
    out: list[ChunkRecord] = []
    start = sum(1 for c in text_chunks if c.chunk_type == ChunkType.TEXT)
    for reading in readings:
        anchor = anchor_of(reading.image.url, text_chunks)
        headings = list(anchor.metadata.get("headings", [])) if anchor else []
        doc_title = title or (str(anchor.metadata.get("title", "")) if anchor else "")
        pieces = [(ChunkType.IMAGE_OCR, d.content) for d in chunk_text(reading.ocr_text, chunk_size, 0)] if reading.ocr_text else []
        if reading.caption:
            pieces.append((ChunkType.IMAGE_CAPTION, reading.caption))
        for kind, content in pieces:
            metadata = {"headings": headings, "title": doc_title, "text_chunk_id": anchor.id if anchor else None,
                        "images": [image_info(reading, content if kind == ChunkType.IMAGE_OCR else "")], **placed_at(anchor)}
            text = embedding_text(content, headings)
            out.append(ChunkRecord(new_id(), kb_id, knowledge_id, start + len(out), content, kind, metadata=metadata,
                                   tokens=keyword_tokens(text, doc_title)))
        if vectors:  # the seed's image row: the description as content, the image's own vector as its only index
            description = reading.caption or reading.ocr_text[: defaults.IMAGE_CAPTION_MAX_CHARS]
            metadata = {"headings": headings, "title": doc_title, "text_chunk_id": anchor.id if anchor else None,
                        "images": [image_info(reading, reading.ocr_text)], **placed_at(anchor)}
            out.append(ChunkRecord(new_id(), kb_id, knowledge_id, start + len(out), description, ChunkType.IMAGE_VECTOR,
                                   metadata=metadata, indexed=False))
    return out


def carry_over(old: Sequence[ChunkRecord], text_chunks: Sequence[ChunkRecord]) -> list[ChunkRecord]:
    """A reparse keeps the image chunks (their text came from the images, not from the stored text):
    fresh ids, numbered after the new text chunks, linked to the text chunk that now holds the image."""
    start = sum(1 for c in text_chunks if c.chunk_type == ChunkType.TEXT)
    out = []
    for i, chunk in enumerate(c for c in old if c.chunk_type in IMAGE_CHUNK_TYPES):
        images = chunk.metadata.get("images") or [{}]
        anchor = anchor_of(str(images[0].get("url", "")), text_chunks)
        metadata = {**{k: v for k, v in chunk.metadata.items() if k not in (PAGES, START, END)},
                    "text_chunk_id": anchor.id if anchor else None, **placed_at(anchor)}
        out.append(ChunkRecord(uuid.uuid4().hex, chunk.knowledge_base_id, chunk.knowledge_id, start + i, chunk.content,
                               chunk.chunk_type, metadata=metadata, tokens=chunk.tokens, indexed=chunk.indexed))
    return out
