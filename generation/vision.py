"""Images for the answering model (seed: into_chat_message "image search", chat_completion ContextImages).

A vision model sees the images themselves: up to CONTEXT_IMAGES_MAX images of the final context
(image hits first, de-duplicated by image), each a PNG, JPEG, WebP or GIF of at most
CONTEXT_IMAGE_MAX_BYTES (a larger one is re-encoded smaller, or left out), each labelled with its
chunk's id so the citation registry aliases it like the passage it came from; then the images the
user attached. A model without vision reads descriptions instead: the passages already carry
their ImageInfo as text, and the user's images come as the rewrite's description (or the caption
the client sent). Only image identities (handle, chunk id) live in state and checkpoints; the
bytes are read when the answer's messages are built.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ragline import defaults
from ragline.contracts.request import ImageInput, PipelineRequest
from ragline.ingestion.image_store import StoredImages
from ragline.models.local_engine import PROVIDER
from ragline.models.openai_stream import serves_directly
from ragline.models.vision import vision_data_url
from ragline.settings import Settings

# PIL's format name -> the media type a provider is told; nothing else is sent (the seed's set)
IMAGE_CHUNK_TYPES = ("image_ocr", "image_caption", "image_vector")  # image hits: their images go first
Part = dict[str, Any]


def supports_vision(model: str, settings: Settings, request: PipelineRequest | None = None) -> bool:
    """The request says so, the deployment lists the model, or litellm's model map knows it sees."""
    if (request is not None and request.chat_model_supports_vision) or model in settings.vision_models:
        return True
    if model.startswith(f"{PROVIDER}/"):  # the embedded model reads text only; no litellm import on its path
        return False
    if model == settings.chat_model and settings.chat_direct and serves_directly(model, settings.chat_api_base):
        # a self-hosted model litellm's map cannot know; importing litellm here would stall the event loop for
        # seconds mid-turn (long enough for another replica to take the run over): list it in vision_models
        return False
    from ragline.models.retry import import_litellm

    try:
        return bool(import_litellm().supports_vision(model=model))
    except Exception:  # an unknown model is a text model: descriptions always work
        return False


@dataclass(frozen=True)
class ImageRef:
    """One image of the final context: its stored handle and the chunk that brought it."""

    chunk_id: str
    url: str


def _fields(result: Any) -> tuple[str, str, list[Any]]:
    data = result.model_dump(mode="json") if hasattr(result, "model_dump") else dict(result)
    images = (data.get("metadata") or {}).get("images") or []
    return str(data.get("id", "")), str(data.get("chunk_type", "")), images if isinstance(images, list) else []


def context_image_refs(results: Iterable[Any]) -> list[ImageRef]:
    """The ImageInfo of the contexts in answer order, image hits before images that merely sit in a
    text passage, each image once (the first chunk that holds it labels it)."""
    hits: list[ImageRef] = []
    others: list[ImageRef] = []
    for result in results:
        chunk_id, chunk_type, images = _fields(result)
        for image in images:
            if isinstance(image, dict) and image.get("url"):
                (hits if chunk_type in IMAGE_CHUNK_TYPES else others).append(ImageRef(chunk_id, str(image["url"])))
    unique: dict[str, ImageRef] = {}
    for ref in [*hits, *others]:
        unique.setdefault(ref.url, ref)
    return list(unique.values())


def context_image_parts(refs: Sequence[ImageRef], store: StoredImages, limit: int = defaults.CONTEXT_IMAGES_MAX) -> list[Part]:
    """Message parts for the first `limit` usable images: a label naming the chunk, then the image.
    Blocking reads (disk or Redis): call it in a worker thread."""
    parts: list[Part] = []
    sent = 0
    for ref in refs:
        if sent >= limit:
            break
        data = store.read(ref.url)  # bounded by the ingestion limit before anything is read
        url = vision_data_url(data) if data is not None else None
        if url is None:
            continue
        sent += 1
        parts.append({"type": "text", "text": f"Image {sent}, from {ref.chunk_id} ({ref.url}):"})
        parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


def user_image_url(image: ImageInput) -> str | None:
    """What a vision model gets for an attached image: an http(s) URL as it is (the provider fetches
    it), a `data:` image checked like a stored one; None for anything else."""
    if image.url.startswith(("https://", "http://")):
        return image.url
    header, comma, payload = image.url.partition(",")
    if not comma or not header.startswith("data:image/") or not header.endswith(";base64"):
        return None
    if len(payload) > defaults.IMAGE_MAX_BYTES * 4 // 3 + 4:  # decode nothing beyond the ingestion bound
        return None
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return None
    return vision_data_url(data)


def user_image_parts(images: Sequence[ImageInput]) -> list[Part]:
    urls = [url for url in map(user_image_url, images) if url is not None]
    return [{"type": "image_url", "image_url": {"url": url}} for url in urls]


def image_descriptions(images: Sequence[ImageInput], description: str) -> str:
    """The user's images for a model without vision: the rewrite's description, else their captions."""
    if not images:
        return ""
    text = description.strip() or "\n".join(c for image in images if (c := (image.caption or "").strip()))
    noun = "image" if len(images) == 1 else f"{len(images)} images"
    return f"The user attached {noun}. Description: {text}" if text else f"The user attached {noun}; no description of it is available."
