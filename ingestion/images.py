"""Images inside documents: checked, extracted and stored once (seed: docreader image extraction, ImageInfo).

An image is read only after its header says it is small enough: the byte size, then the
dimensions (PIL reads them without decoding pixels), so a 50,000 x 50,000 decompression bomb is
refused before it costs memory. Each accepted image gets a content address (sha256) and a stored
handle `local://images/<sha>.<ext>`; the document's text carries it as a Markdown image where the
image stood, so the citations package aliases it (res://NNNN) like any stored resource.

Markdown (and HTML) images: `data:` URIs are decoded and stored; remote and relative URLs are left
in the text as they are and never fetched (an upload must not make the server call out, and a
relative file is not part of the upload).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import logging
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragline import defaults
from ragline.retrieval.errors import DocumentTooLargeError, IngestionError

log = logging.getLogger(__name__)

# PIL format name -> the extension the image is stored under (the seed's PNG/JPEG/WebP/GIF set)
FORMATS = {"PNG": "png", "JPEG": "jpg", "WEBP": "webp", "GIF": "gif"}
IMAGE_TYPES = ("png", "jpg", "jpeg", "webp", "gif")
URL_SCHEME = "local://images/"
# bounded by construction: base64 of IMAGE_MAX_BYTES; the classes never overlap, so no backtracking
_DATA_IMAGE = re.compile(r"!\[([^\]\n]*)\]\(\s*data:image/[A-Za-z0-9.+-]+;base64,([A-Za-z0-9+/=\s]+?)\s*\)")


@dataclass(frozen=True)
class ExtractedImage:
    """One accepted image: its bytes as uploaded (or as the PDF held them) and where it stood."""

    data: bytes
    ext: str  # png, jpg, webp or gif: from the bytes, never from a file name
    width: int
    height: int
    sha256: str
    alt: str = ""
    origin: str = ""  # "page 3", "paragraph 12", the upload's name: for people reading the chunk

    @property
    def url(self) -> str:
        return image_url(self.sha256, self.ext)


def image_url(sha256: str, ext: str) -> str:
    return f"{URL_SCHEME}{sha256}.{ext}"


def markdown_reference(image: ExtractedImage) -> str:
    return f"![{image.alt}]({image.url})"


_STORED_REFERENCE = re.compile(r"!\[[^\]\n]*\]\(" + re.escape(URL_SCHEME) + r"[0-9a-f]{64}\.[a-z]+\)")


def only_image_references(text: str) -> bool:
    """A chunk made of stored-image references alone: nothing in it to search but the image handles."""
    return bool(_STORED_REFERENCE.search(text)) and not _STORED_REFERENCE.sub("", text).strip()


def inspect_image(data: bytes, label: str, alt: str = "", origin: str = "") -> ExtractedImage:
    """The image, if it is a PNG, JPEG, WebP or GIF within the byte and pixel bounds.

    DocumentTooLargeError past a bound, IngestionError for anything that is not such an image.
    """
    from PIL import Image, UnidentifiedImageError
    from PIL.Image import DecompressionBombError

    if len(data) > defaults.IMAGE_MAX_BYTES:
        raise DocumentTooLargeError(f"{label} is {len(data) // 2**20:,} MB, more than {defaults.IMAGE_MAX_BYTES // 2**20} MB for one image")
    try:
        with Image.open(io.BytesIO(data)) as probe:  # reads the header only: no pixel is decoded here
            kind, width, height = probe.format or "", probe.width, probe.height
            if kind in FORMATS:
                probe.verify()  # walks the chunks (CRCs, truncation) without decoding the pixels
    except DecompressionBombError:  # PIL's own guard, far above ours: a header claiming billions of pixels
        raise DocumentTooLargeError(f"{label} claims more than {defaults.IMAGE_MAX_PIXELS:,} pixels") from None
    except UnidentifiedImageError:
        raise IngestionError(f"{label} is not a PNG, JPEG, WebP or GIF image") from None
    except (OSError, SyntaxError, ValueError) as exc:  # a known format, but truncated or corrupt
        raise IngestionError(f"{label} is a damaged image ({exc})") from None
    if kind not in FORMATS:
        raise IngestionError(f"{label} is a {kind or 'unknown'} image; images may be PNG, JPEG, WebP or GIF")
    if width * height > defaults.IMAGE_MAX_PIXELS:
        raise DocumentTooLargeError(f"{label} is {width:,} x {height:,} pixels, more than {defaults.IMAGE_MAX_PIXELS:,} pixels for one image")
    return ExtractedImage(data, FORMATS[kind], width, height, hashlib.sha256(data).hexdigest(), alt, origin)


def readable(image: ExtractedImage) -> bool:
    """Icons, bullets and spacer pixels hold no text worth a chunk."""
    return min(image.width, image.height) >= defaults.IMAGE_MIN_SIDE


class ImageCollector:
    """The images of one document: de-duplicated by content, bounded in number, failures counted.

    An embedded image that is broken or too large is skipped (the document's text still counts);
    a standalone image upload is checked by `inspect_image` directly and refused instead.
    """

    def __init__(self, label: str) -> None:
        self.label = label
        self.images: list[ExtractedImage] = []
        self.skipped = 0
        self._seen: dict[str, ExtractedImage] = {}

    def add(self, data: bytes, alt: str = "", origin: str = "") -> ExtractedImage | None:
        """The accepted image (the first copy when it repeats), or None when it was skipped."""
        try:
            image = inspect_image(data, f"an image in {self.label} ({origin})", alt, origin)
        except IngestionError as exc:
            log.info("skipped: %s", exc)
            self.skipped += 1
            return None
        if image.sha256 in self._seen:  # a logo on every page is stored and read once
            return self._seen[image.sha256]
        if not readable(image):
            return None
        if len(self.images) >= defaults.IMAGES_MAX_PER_DOCUMENT:
            self.skipped += 1
            return None
        self._seen[image.sha256] = image
        self.images.append(image)
        return image


def markdown_images(text: str, collector: ImageCollector) -> str:
    """`![alt](data:image/...;base64,...)` becomes `![alt](local://images/<sha>.<ext>)` (or just the
    alt text when the image is refused); every other image reference stays untouched, unfetched."""

    def store(match: re.Match[str]) -> str:
        alt, payload = match.group(1), re.sub(r"\s+", "", match.group(2))
        if len(payload) > defaults.IMAGE_MAX_BYTES * 4 // 3 + 4:  # decode nothing beyond the byte bound
            collector.skipped += 1
            return alt
        try:
            data = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            collector.skipped += 1
            return alt
        image = collector.add(data, alt, f"image {collector.skipped + len(collector.images) + 1}")
        return markdown_reference(image) if image is not None else alt

    return _DATA_IMAGE.sub(store, text)


def pdf_page_images(page: Any, page_number: int, collector: ImageCollector) -> list[ExtractedImage]:
    """The page's image XObjects (top level and inside form XObjects), dimensions checked before pypdf decodes them."""
    found: list[ExtractedImage] = []
    for key, width, height in _pdf_image_keys(page):
        origin = f"page {page_number}"
        if width * height > defaults.IMAGE_MAX_PIXELS:
            log.info("skipped a %d x %d image on %s of %s: too many pixels", width, height, origin, collector.label)
            collector.skipped += 1
            continue
        if min(width, height) < defaults.IMAGE_MIN_SIDE:
            continue
        try:
            data = page.images[key].data  # pypdf re-encodes raw samples as PNG, keeps JPEG as it is
        except Exception as exc:  # a broken image stream must not lose the page's text
            log.info("skipped an unreadable image on %s of %s: %s", origin, collector.label, exc)
            collector.skipped += 1
            continue
        image = collector.add(data, "", origin)
        if image is not None and image not in found:
            found.append(image)
    return found


def _pdf_image_keys(page: Any) -> list[tuple[Any, int, int]]:
    """(pypdf image key, width, height) of each image XObject, read from the dictionaries only."""
    out: list[tuple[Any, int, int]] = []

    def walk(resources: Any, path: list[str], depth: int) -> None:
        xobjects = resources.get("/XObject") if resources is not None else None
        if xobjects is None:
            return
        xobjects = xobjects.get_object()
        for name in list(xobjects.keys()):
            xobject = xobjects[name].get_object()
            subtype = xobject.get("/Subtype")
            if subtype == "/Image":
                key = name if not path else [*path, name]
                out.append((key, int(xobject.get("/Width", 0)), int(xobject.get("/Height", 0))))
            elif subtype == "/Form" and depth < 2:  # forms may nest; two levels cover real documents
                inner = xobject.get("/Resources")
                walk(inner.get_object() if inner is not None else None, [*path, name], depth + 1)

    resources = page.get("/Resources")
    walk(resources.get_object() if resources is not None else None, [], 0)
    return out


def docx_paragraph_images(element: Any, part: Any, origin: str, collector: ImageCollector) -> list[ExtractedImage]:
    """The pictures drawn in one paragraph (`a:blip r:embed` relations to image parts)."""
    found: list[ExtractedImage] = []
    for rel_id in element.xpath(".//a:blip/@r:embed"):
        related = part.related_parts.get(rel_id)
        blob = getattr(related, "blob", None)
        if not isinstance(blob, bytes):
            continue
        image = collector.add(blob, "", origin)  # an unpacked .docx is already bounded by check_archive
        if image is not None and image not in found:
            found.append(image)
    return found


def stored_name(url: str) -> str | None:
    """`<sha256>.<ext>` of a `local://images/...` handle, or None for any other (or a crafted) handle:
    the only names a store reads or writes, so no handle can reach outside it."""
    if not url.startswith(URL_SCHEME):
        return None
    name = url[len(URL_SCHEME):]
    return name if re.fullmatch(r"[0-9a-f]{64}\.(png|jpg|webp|gif)", name) else None


class ImageStore:
    """Content-addressed files under one folder (embedded mode): an image stored twice is one file.
    Shared mode keeps them in Redis instead (ingestion/image_store.py), behind the same save/read."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path_of(self, url: str) -> Path | None:
        """The file behind a `local://images/...` handle, or None for any other (or a crafted) handle."""
        name = stored_name(url)
        return self.root / name if name is not None else None

    def read(self, url: str) -> bytes | None:
        """The image's bytes, or None when the handle is not a stored image's or the file is gone;
        a file beyond the ingestion bound is never read. Blocking: call it in a worker thread."""
        path = self.path_of(url)
        if path is None or not path.is_file() or path.stat().st_size > defaults.IMAGE_MAX_BYTES:
            return None
        return path.read_bytes()

    def save(self, image: ExtractedImage) -> Path:
        """Write the image once (atomically: a reader never sees half a file)."""
        path = self.root / f"{image.sha256}.{image.ext}"
        if path.exists():
            return path
        self.root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.root, suffix=".part")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(image.data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path
