"""Offline OCR: rapidocr-onnxruntime (PP-OCRv4 models shipped inside its wheel, no download).

The engine loads once per process (three ONNX sessions, ~0.2 s) and reads one image at a time:
OCR is CPU work that already uses every core, so two at once would only make both slower.
Callers run `read` in a worker thread (`asyncio.to_thread`), one image per call, so a cancelled
upload stops between images.
"""

from __future__ import annotations

import io
import threading
from typing import Any, Protocol

from ragline import defaults
from ragline.retrieval.errors import IngestionError


class OcrUnavailableError(IngestionError):
    """rapidocr-onnxruntime (or OpenCV's system libraries) cannot be imported: the image is refused, saying why."""


class ImageReader(Protocol):
    def read(self, data: bytes) -> str: ...


class OcrEngine:
    """Text lines of an image, top to bottom, as rapidocr reads them."""

    def __init__(self) -> None:
        self._engine: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        try:
            from rapidocr_onnxruntime import RapidOCR
        except ImportError as exc:
            raise OcrUnavailableError("image text needs rapidocr-onnxruntime: pip install rapidocr-onnxruntime") from exc
        # the detector's default upscales the short side to 736 px: 10x slower on screenshots, no better
        return RapidOCR(det_limit_type="max", det_limit_side_len=defaults.IMAGE_OCR_DETECT_MAX_SIDE,
                        text_score=defaults.IMAGE_OCR_MIN_SCORE)

    def read(self, data: bytes) -> str:
        """The image's text, lines joined by newlines, cut at IMAGE_OCR_MAX_CHARS ("" when it has none).

        The caller has checked the pixel count (ingestion/images.py) before this decodes anything;
        a larger image is read scaled down to IMAGE_OCR_DECODE_MAX_SIDE.
        """
        import numpy as np
        from PIL import Image

        with Image.open(io.BytesIO(data)) as image:  # a GIF: its first frame
            rgba = decoded_within(image, defaults.IMAGE_OCR_DECODE_MAX_SIDE).convert("RGBA")
        # transparent pixels are often black underneath: flattened as they are, dark text would vanish
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        pixels = np.array(Image.alpha_composite(white, rgba).convert("RGB"))
        with self._lock:
            if self._engine is None:
                self._engine = self._load()
            lines, _ = self._engine(pixels)
        # a line with under two letters or digits is a chart bar or a border read as ".I.i": noise, not text
        text = "\n".join(t for t in (str(line[1]).strip() for line in lines or []) if sum(c.isalnum() for c in t) >= 2)
        return text[: defaults.IMAGE_OCR_MAX_CHARS]


def decoded_within(image: Any, max_side: int) -> Any:
    """The image's pixels with its longest side at most `max_side`: a JPEG is decoded at a reduced
    scale (draft), anything else decoded once and scaled down at once, so that the copies OCR makes
    next (RGBA, the white background, RGB, the array) are each at most max_side squared."""
    if max(image.size) <= max_side:
        return image
    image.draft("RGB", (max_side, max_side))  # JPEG only: decodes at 1/2, 1/4 or 1/8 of the size
    image.thumbnail((max_side, max_side))
    return image
