"""Ids of new documents and chunks: random, or derived from a revision so a re-run repeats them.

An ingestion job that a dead worker left half-done is run again by another worker. Its vectors and
keyword rows may already be stored (they are written before the catalog commit that makes the
document visible). Inside `revision_ids(job_id)` every new id is derived from the job id and the
order it is drawn in, and parsing, chunking and image reading draw them in the same order for the
same bytes; so the re-run upserts the very same rows instead of leaving a second, orphaned copy.
"""

from __future__ import annotations

import contextvars
import hashlib
import uuid
from collections.abc import Iterator
from contextlib import contextmanager


class _Mint:
    """Deterministic ids: sha256(seed, n) for the n-th id drawn (a counter shared by threads of one job)."""

    def __init__(self, seed: str) -> None:
        self.seed, self.drawn = seed, 0

    def next(self) -> str:
        self.drawn += 1
        return hashlib.sha256(f"{self.seed}\n{self.drawn}".encode()).hexdigest()[:32]


# a ContextVar, not a parameter: asyncio.to_thread copies the context, so the chunker's thread sees it too
_MINT: contextvars.ContextVar[_Mint | None] = contextvars.ContextVar("ragline_revision_ids", default=None)


def new_id() -> str:
    """A fresh 32-hex id: random, or the next id of the current revision."""
    mint = _MINT.get()
    return mint.next() if mint is not None else uuid.uuid4().hex


@contextmanager
def revision_ids(seed: str) -> Iterator[None]:
    """Within the block, new ids repeat for the same seed (one seed per document revision, e.g. its job id)."""
    token = _MINT.set(_Mint(seed))
    try:
        yield
    finally:
        _MINT.reset(token)
