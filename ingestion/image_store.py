"""Where document images are kept: files under data_dir/images (embedded mode, ingestion/images.py
ImageStore) or the shared Redis (shared mode, RAGLINE_REDIS_URL), behind one small interface.

In shared mode the worker that ingests a document and the replica that serves its image (the
image route, the answer stage's context images) are different processes on different disks, so
the bytes live in Redis under their content address: `ragline:image:<sha256>.<ext>`. Handles stay
`local://images/<sha256>.<ext>` in both modes: chunks, citations and the page never learn where
the bytes are. An image is written once (SET NX) and never changed; its size was bounded at
ingestion (IMAGE_MAX_BYTES).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ragline import defaults
from ragline.ingestion.images import ExtractedImage, ImageStore, stored_name

if TYPE_CHECKING:
    import redis

KEY_PREFIX = "ragline:image:"


class StoredImages(Protocol):
    """Images by handle. Both methods block (disk or network): call them in a worker thread."""

    def save(self, image: ExtractedImage) -> object:  # object: the file store also returns its path
        """Store the image once; storing the same bytes again changes nothing."""

    def read(self, url: str) -> bytes | None:
        """The bytes behind a `local://images/...` handle; None for any other handle or a missing image."""


class RedisImageStore:
    """Content-addressed image bytes in the shared Redis, readable by every replica."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client  # raw bytes replies (no decode_responses): images are binary

    def save(self, image: ExtractedImage) -> None:
        # NX: the same content is the same key, so a second copy (another document, a retried job) writes nothing
        self.client.set(f"{KEY_PREFIX}{image.sha256}.{image.ext}", image.data, nx=True)

    def read(self, url: str) -> bytes | None:
        name = stored_name(url)
        if name is None:
            return None
        data = self.client.get(f"{KEY_PREFIX}{name}")
        if not isinstance(data, bytes) or len(data) > defaults.IMAGE_MAX_BYTES:
            return None
        return data


def open_image_store(root: Path, redis_client: redis.Redis | None) -> StoredImages:
    """Redis when the deployment shares one, else files under `root` (data_dir/images)."""
    return RedisImageStore(redis_client) if redis_client is not None else ImageStore(root)
