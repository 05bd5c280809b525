"""Stored images by handle: `GET /api/v1/images/<sha256>.<ext>` serves `local://images/<sha256>.<ext>`.

Answers cite image chunks whose ImageInfo holds such a handle; the page shows them as thumbnails
from here. An image is served only to a reader who may read a document whose chunk shows it (its
base's rule and its own); any other name (a missing file, another tenant's image, a crafted path) is the
same 404, so the route says nothing about what exists. The stored name comes only from
`stored_name`, which accepts nothing but the content-address shape: no traversal. The bytes come
from the deployment's image store: files in embedded mode, Redis in shared mode.
"""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import Response

from ragline.api import inputs
from ragline.api.errors import NotFound
from ragline.api.host import HttpHost, host_of
from ragline.api.openapi import doc
from ragline.ingestion.images import URL_SCHEME, stored_name
from ragline.retrieval.catalog import Catalog
from ragline.service.access import Principal

TAG = "knowledge"
MEDIA_TYPES = {"png": "image/png", "jpg": "image/jpeg", "webp": "image/webp", "gif": "image/gif"}
# Content-addressed, so never stale; private: whether a cache may hand it out depends on the key.
IMAGE_HEADERS = {
    "Cache-Control": "private, max-age=86400, immutable",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; sandbox",  # opened on its own, an image runs nothing
}


def _shown_to(catalog: Catalog, handle: str, who: Principal) -> bool:
    """Whether a document `who` may read shows the image (its base and its own rule let `who` in)."""
    documents = catalog.get_knowledge_many(catalog.documents_showing(handle))
    kbs = catalog.get_kbs(sorted({d.knowledge_base_id for d in documents.values()}))
    return any((kb := kbs.get(d.knowledge_base_id)) is not None and kb.readable_by(who) and d.access.lets_in(who) is not None
               for d in documents.values())


def handle_of(name: str) -> str:
    """The stored handle a route name stands for (`<sha>.<ext>` -> `local://images/<sha>.<ext>`)."""
    return f"{URL_SCHEME}{name}"


async def readable_image(svc: HttpHost, who: Principal, handle: str) -> bytes:
    """The image's bytes when the caller may see it; NotFound otherwise (one answer for every refusal)."""
    if stored_name(handle) is None:
        raise NotFound("no such image")
    stack = await svc.stack()
    if not await asyncio.to_thread(_shown_to, stack.catalog, handle, who):
        raise NotFound("no such image")
    # files in embedded mode, Redis in shared mode: every replica serves what any worker stored
    data = await asyncio.to_thread(svc.core.images.store.read, handle)
    if data is None:
        raise NotFound("no such image")
    return data


@doc("A stored image of a knowledge base the caller may read (the `local://images/<name>` of ImageInfo)", TAG, errors=(401, 404))
async def get_image(request: Request) -> Response:
    """The image's bytes with its content type (PNG, JPEG, WebP or GIF)."""
    svc = host_of(request)
    who = svc.authenticate(request)
    name = inputs.path(request, "name")
    data = await readable_image(svc, who, handle_of(name))
    return Response(data, media_type=MEDIA_TYPES[name.rsplit(".", 1)[1]], headers=IMAGE_HEADERS)
