"""What a vision model accepts: an image as a `data:` URL in a format every provider reads,
re-encoded smaller when it is too large for one request."""

from __future__ import annotations

import base64
import io
from typing import Any

from ragline import defaults

VISION_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}


def vision_data_url(data: bytes, max_bytes: int = defaults.CONTEXT_IMAGE_MAX_BYTES) -> str | None:
    """A `data:` URL a provider accepts: the image as it is when it is a PNG, JPEG, WebP or GIF
    within `max_bytes`, else re-encoded as a smaller JPEG; None for anything else."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:  # the header only, until a re-encode needs pixels
            kind = image.format or ""
            if kind not in VISION_FORMATS or image.width * image.height > defaults.IMAGE_MAX_PIXELS:
                return None
            if len(data) > max_bytes:
                data, kind = _smaller_jpeg(image), "JPEG"
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
        return None
    if len(data) > max_bytes:
        return None
    return f"data:{VISION_FORMATS[kind]};base64,{base64.b64encode(data).decode('ascii')}"


def _smaller_jpeg(image: Any) -> bytes:
    copy = image.convert("RGB")
    copy.thumbnail((defaults.CONTEXT_IMAGE_MAX_SIDE, defaults.CONTEXT_IMAGE_MAX_SIDE))
    out = io.BytesIO()
    copy.save(out, "JPEG", quality=85)
    return out.getvalue()
