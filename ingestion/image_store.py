"""Where document images are kept: files under data_dir/images (embedded mode, ingestion/images.py
ImageStore) or the shared Redis (shared mode, RAGLINE_REDIS_URL), behind one small interface.

In shared mode the worker that ingests a document and the replica that serves its image (the
image route, the answer stage's context images) are different processes on different disks, so
the bytes live in Redis under their content address: `ragline:image:<sha256>.<ext>`. Handles stay
`local://images/<sha256>.<ext>` in both modes: chunks, citations and the page never learn where
the bytes are. An image is written once (SET NX) and never changed; its size was bounded at
ingestion (IMAGE_MAX_BYTES).

An image in Redis is shared by every document showing the same bytes, in any knowledge base, so
deleting a document (or a base) deletes only the images no other document shows. The catalog
keeps who shows what (`ragline:cat:img:<handle>`, the documents whose current chunks show it), and
a concurrent ingestion of the same bytes may have saved the image but not yet committed the
document that shows it. So an image is not unlinked but released:
1. `release`, before the catalog deletes documents: each image only they show gets a TTL of
   `grace_s`, decided in one script against the catalog's set (a commit lands before or after it);
2. `save` (SET NX) lifts a shorter TTL to `grace_s` from now: an ingestion under way keeps its image
   at least that long;
3. `keep`, after a commit: the images the committed documents show lose their TTL again.
So an image a document shows expires only if its ingestion took longer than `grace_s` between
saving the image and committing, or died between its commit and `keep` (then the image reads as
missing: its text chunks still answer), or if a delete released it and then failed before its
catalog step (deleting again finishes the job, as for the vectors it already removed). An ingestion
that fails before its commit leaves a new image stored, as before. The file store of embedded mode
deletes no image (it never did); `release_images` and `keep_images` leave it alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ragline import defaults
from ragline.ingestion.images import ExtractedImage, ImageStore, stored_name
from ragline.retrieval.catalog import ChunkRecord
from ragline.retrieval.redis_catalog import PREFIX as CATALOG_PREFIX

if TYPE_CHECKING:
    import redis

KEY_PREFIX = "ragline:image:"
# As long as a staged catalog revision may still be committed: an ingestion that saved an image
# before it was released can still commit the document that shows it.
RELEASE_GRACE_S = defaults.CATALOG_STAGING_TTL_S

# KEYS: the catalog's set of documents showing the image, the image. ARGV: grace seconds, the
# documents about to be deleted that show it. Expires the image unless another document shows it.
_RELEASE = """
local leaving = {}
for i = 2, #ARGV do leaving[ARGV[i]] = true end
for _, document in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if not leaving[document] then return 0 end
end
return redis.call('EXPIRE', KEYS[2], ARGV[1])
"""


class StoredImages(Protocol):
    """Images by handle. Both methods block (disk or network): call them in a worker thread."""

    def save(self, image: ExtractedImage) -> object:  # object: the file store also returns its path
        """Store the image once; storing the same bytes again changes nothing."""

    def read(self, url: str) -> bytes | None:
        """The bytes behind a `local://images/...` handle; None for any other handle or a missing image."""


class RedisImageStore:
    """Content-addressed image bytes in the shared Redis, readable by every replica."""

    def __init__(self, client: redis.Redis, grace_s: int = RELEASE_GRACE_S) -> None:
        self.client = client  # raw bytes replies (no decode_responses): images are binary
        self.grace_s = grace_s
        self._release = client.register_script(_RELEASE)

    def save(self, image: ExtractedImage) -> None:
        key = f"{KEY_PREFIX}{image.sha256}.{image.ext}"
        with self.client.pipeline(transaction=True) as pipe:  # one step: the image cannot expire between the two
            # NX: the same content is the same key, so a second copy (another document, a retried job) writes nothing
            pipe.set(key, image.data, nx=True)
            # GT: a released image lives on for this ingestion; a kept one (no TTL) stays kept
            pipe.expire(key, self.grace_s, gt=True)
            pipe.execute()

    def read(self, url: str) -> bytes | None:
        name = stored_name(url)
        if name is None:
            return None
        data = self.client.get(f"{KEY_PREFIX}{name}")
        if not isinstance(data, bytes) or len(data) > defaults.IMAGE_MAX_BYTES:
            return None
        return data

    def release(self, knowledge_ids: Sequence[str]) -> int:
        """Before the catalog deletes these documents: the images only they show expire in grace_s.
        Returns how many were released."""
        with self.client.pipeline(transaction=False) as pipe:
            for knowledge_id in knowledge_ids:
                pipe.hget(f"{CATALOG_PREFIX}doc:{knowledge_id}", "images")
            shown = pipe.execute()
        showing: dict[str, list[str]] = {}  # handle -> the leaving documents that show it
        for knowledge_id, raw in zip(knowledge_ids, shown, strict=True):
            # the catalog's JSON list of handles (cjson writes an empty one as {}: no handles either)
            for handle in json.loads(raw) if raw else []:
                showing.setdefault(handle, []).append(knowledge_id)
        with self.client.pipeline(transaction=False) as pipe:
            for handle, name in _named(sorted(showing)):
                self._release(keys=[f"{CATALOG_PREFIX}img:{handle}", f"{KEY_PREFIX}{name}"],
                              args=[self.grace_s, *showing[handle]], client=pipe)
            return sum(int(released) for released in pipe.execute())

    def keep(self, handles: Iterable[str]) -> None:
        """After a commit: the images its documents show stay (a release meanwhile gave them a TTL)."""
        with self.client.pipeline(transaction=False) as pipe:
            for _, name in _named(handles):
                pipe.persist(f"{KEY_PREFIX}{name}")
            pipe.execute()


def _named(handles: Iterable[str]) -> list[tuple[str, str]]:
    """(handle, stored name) of each handle that names a stored image (never a crafted key)."""
    return [(handle, name) for handle in handles if (name := stored_name(handle)) is not None]


def image_handles(chunks: Iterable[ChunkRecord]) -> list[str]:
    """The images the chunks show: their ImageInfo urls (what the catalog indexes), never text."""
    return sorted({str(image["url"]) for chunk in chunks for image in chunk.metadata.get("images") or []
                   if isinstance(image, dict) and image.get("url")})


def release_images(store: StoredImages, knowledge_ids: Sequence[str]) -> None:
    """Call before the catalog deletes documents (blocking). Redis only: see the module docstring."""
    if isinstance(store, RedisImageStore) and knowledge_ids:
        store.release(knowledge_ids)


def keep_images(store: StoredImages, chunks: Iterable[ChunkRecord]) -> None:
    """Call after the catalog committed these chunks (blocking). Redis only: see the module docstring."""
    if isinstance(store, RedisImageStore) and (handles := image_handles(chunks)):
        store.keep(handles)


def open_image_store(root: Path, redis_client: redis.Redis | None) -> StoredImages:
    """Redis when the deployment shares one, else files under `root` (data_dir/images)."""
    return RedisImageStore(redis_client) if redis_client is not None else ImageStore(root)
