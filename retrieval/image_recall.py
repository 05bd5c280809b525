"""Image recall of HybridSearch (seed: knowledgebase_search_image.go, step 5).

An image's own vector comes from the multimodal embedding model (RAGLINE_IMAGE_EMBEDDING_MODEL),
whose space and dimension differ from the KB's text model, so image rows live in a vector space
of their own beside the KB's text rows: one per (KB, image model), so a changed model queries an
empty space instead of mixing incomparable vectors. The seed's rules then read:
- a group whose bases hold image vectors searches its document vectors 1.5x deeper (cap 500): the
  image rows share the vector pool with the text rows and must not push text out of it;
- image hits pass at min(vector threshold, 0.1), text hits at the vector threshold: a text
  question is by nature less similar to an image than to a text (the modality gap);
- image rows are never keyword hits (their chunks are not keyword-indexed) and only image rows of
  the bases that were searched for images count (filter_image_hits).
The seed also refills a pool after dropping image rows its engine returned mixed with text
(refillPastDroppedImages); here the engine never mixes them, so no dropped row takes a place.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence

from ragline import defaults
from ragline.retrieval.fusion import Hit


def image_space(kb_id: str, model_key: str) -> str:
    """The vector-store key of a KB's image rows for one image model (a Chroma collection / Redis index name)."""
    return f"{kb_id}-img-{hashlib.sha256(model_key.encode()).hexdigest()[:12]}"


def image_depth(depth: int) -> int:
    """The group's document vector depth when it holds image vectors: 1.5x, still capped at 500."""
    return min(math.ceil(depth * defaults.IMAGE_RECALL_DEPTH_FACTOR), defaults.MAX_RETRIEVAL_POOL_SIZE)


def image_threshold(vector_threshold: float) -> float:
    """The bar an image hit passes: min(vector threshold, 0.1)."""
    return min(vector_threshold, defaults.IMAGE_RECALL_MAX_THRESHOLD)


def filter_image_hits(text_hits: Iterable[Hit], image_hits: Iterable[Hit], image_kb_ids: set[str],
                      vector_threshold: float) -> list[Hit]:
    """filterImageHits: each source by its own threshold; image rows of bases not searched for images go."""
    kept = [h for h in text_hits if h.score >= vector_threshold]
    bar = image_threshold(vector_threshold)
    kept += [h for h in image_hits if h.knowledge_base_id in image_kb_ids and h.score >= bar]
    return kept


def vector_pool(text_hits: Sequence[Hit], image_hits: Sequence[Hit], image_kb_ids: set[str],
                vector_threshold: float, depth: int) -> list[Hit]:
    """The group's vector list: text and image hits ranked together, cut to the depth the seed allows.

    Without any image hit nothing changes (plain depth); with some, the pool is 1.5x deep, as one
    engine holding both kinds of rows would have returned it.
    """
    kept = filter_image_hits(text_hits, image_hits, image_kb_ids, vector_threshold)
    has_images = any(h.knowledge_base_id in image_kb_ids for h in image_hits)
    return sorted(kept, key=lambda h: -h.score)[: image_depth(depth) if has_images else depth]
