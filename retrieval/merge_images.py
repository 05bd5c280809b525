"""The image parts of chunk_merge (seed: merge.go resolveParentChunks step 4, searchutil imageinfo*.go).

An image hit (image_ocr, image_caption, image_vector) is self-contained: its content is the
image's text, and `metadata.text_chunk_id` names the text chunk where the image stood. Step 4
chains image -> text chunk -> that chunk's parent (looked up only when there is an image hit) to
give the image its surrounding text, and keeps the image's own text after it: the OCR is often the
very answer. When that context already came with another hit, the image hit stays short (its
own text under a link to the image) instead of repeating it.
Markdown images are pruned by their stable URL (PruneMarkdownImagesByImageInfo): a stored image
referenced in a passage stays only when some result carries its ImageInfo, so a parent holding
many images does not show those nobody found.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ragline.contracts.passages import ChunkType, MatchType, SearchResult
from ragline.retrieval.catalog import Catalog
from ragline.retrieval.own_text import rewritten

IMAGE_HIT_TYPES = (ChunkType.IMAGE_OCR, ChunkType.IMAGE_CAPTION, ChunkType.IMAGE_VECTOR)
STORED_IMAGE_SCHEME = "local://images/"  # ingestion/images.py URL_SCHEME: only stored images have an ImageInfo
_STORED_IMAGE = re.compile(r"!\[[^\]\n]*\]\((" + re.escape(STORED_IMAGE_SCHEME) + r"[0-9a-f]{64}\.[a-z]+)\)\n?")


def is_image_hit(result: SearchResult) -> bool:
    return result.chunk_type in IMAGE_HIT_TYPES


def image_urls(result: SearchResult) -> list[str]:
    images = result.metadata.get("images") or []
    return [str(i["url"]) for i in images if isinstance(i, dict) and i.get("url")]


def _contexts(hits: Sequence[SearchResult], catalog: Catalog) -> dict[str, tuple[str, str, str | None]]:
    """text_chunk_id -> (context text, context chunk id, parent id): the parent's text when the text chunk has one."""
    texts = catalog.get_chunks([str(h.metadata["text_chunk_id"]) for h in hits])
    parent_ids = [t.parent_id for t in texts.values() if t.parent_id]
    parents = catalog.get_chunks(parent_ids) if parent_ids else {}
    out: dict[str, tuple[str, str, str | None]] = {}
    for text_id, text in texts.items():
        parent = parents.get(text.parent_id or "")
        if parent is not None and parent.content:
            out[text_id] = (parent.content, parent.id, parent.id)
        else:
            out[text_id] = (text.content, text.id, None)
    return out


def resolve_image_chains(results: Sequence[SearchResult], catalog: Catalog) -> list[SearchResult]:
    """Step 4 for image hits: the context of the text chunk the image stood in, then the image's own text."""
    hits = [r for r in results if is_image_hit(r) and r.metadata.get("text_chunk_id")]
    if not hits:
        return list(results)
    contexts = _contexts(hits, catalog)
    hit_ids = {h.id for h in hits}
    present = {r.id for r in results if not is_image_hit(r)} | {str(r.metadata.get("parent_chunk_id")) for r in results
                                                                  if not is_image_hit(r) and r.metadata.get("parent_chunk_id")}
    out: list[SearchResult] = []
    for result in results:
        found = contexts.get(str(result.metadata.get("text_chunk_id") or "")) if result.id in hit_ids else None
        if found is not None:
            result = _chained(result, *found, shared=found[1] in present)
            present.add(found[1])  # a second image of the same passage does not repeat it either
        out.append(result)
    return out


def _chained(result: SearchResult, context: str, context_id: str, parent_id: str | None, shared: bool) -> SearchResult:
    own = result.content.strip()
    links = "\n".join(f"![]({url})" for url in image_urls(result) if url not in own)
    if shared:  # the passage is in the context already: the image's text under its link, not the passage again
        content = "\n".join(part for part in (links, own) if part)
    else:
        content = context if own and own in context else "\n\n".join(part for part in (context, own) if part)
    metadata: dict[str, Any] = {**result.metadata, "child_content": result.content, "context_chunk_id": context_id}
    if parent_id:
        metadata["parent_chunk_id"] = parent_id
    return result.model_copy(update={"content": content or result.content, "metadata": metadata})


def prune_markdown_images(results: Sequence[SearchResult]) -> list[SearchResult]:
    """PruneMarkdownImagesByImageInfo: stored-image references no result has the ImageInfo of are cut
    (remote image links are kept: they never had one)."""
    known = {url for result in results for url in image_urls(result)}
    def prune(text: str) -> str:
        pruned = _STORED_IMAGE.sub(lambda m: m.group(0) if m.group(1) in known else "", text)
        return pruned.strip() if pruned != text else text

    return [rewritten(result, prune) for result in results]


def merge_image_info(first: SearchResult, second: SearchResult) -> list[dict[str, Any]]:
    """mergeImageInfo: the image info of both results, the first's order kept, each URL once."""
    images = [i for i in first.metadata.get("images") or [] if isinstance(i, dict)]
    seen = {i.get("url") for i in images}
    for image in second.metadata.get("images") or []:
        if isinstance(image, dict) and image.get("url") not in seen:
            images.append(image)
            seen.add(image.get("url"))
    return images


def absorb_image_hit(keeper: SearchResult, dropped: SearchResult) -> SearchResult:
    """Step 8: a dropped image hit leaves its images with the near-duplicate that stays (mergeImageInfo,
    by URL) and, when it came through the image vector, marks it image_vector_match so a vision model
    still sees the image."""
    if not is_image_hit(dropped):
        return keeper
    metadata = {**keeper.metadata, "images": merge_image_info(keeper, dropped)}
    if dropped.match_type == MatchType.IMAGE_VECTOR or dropped.chunk_type == ChunkType.IMAGE_VECTOR:
        metadata["image_vector_match"] = "true"
    return keeper.model_copy(update={"metadata": metadata})
