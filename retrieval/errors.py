"""Typed errors of the retrieval and ingestion packages; callers turn them into responses."""

from __future__ import annotations


class RetrievalError(RuntimeError):
    """Base of every error raised by ragline.retrieval / ragline.ingestion."""


class KnowledgeBaseNotFoundError(RetrievalError):
    pass


class KnowledgeBaseAccessError(RetrievalError):
    """The tenant neither owns the knowledge base nor has it shared (seed: authorizeKBAccess)."""


class ReadOnlyKeyError(RetrievalError):
    """A knowledge write with a read-only API key (HTTP 403)."""


class KnowledgeBaseExistsError(RetrievalError):
    pass


class EmbeddingModelMismatchError(RetrievalError):
    """KBs of different embedding spaces searched together (seed: validateSameEmbeddingModel)."""


class StoreGroupError(RetrievalError):
    """One store group failed or timed out; the whole search fails (all-or-nothing fan-out)."""


class IngestionError(RetrievalError):
    """A document could not be parsed, chunked, embedded or written; nothing was kept."""


class ParsingStopped(IngestionError):
    """The ingestion was cancelled while its document was being parsed; parsing stopped there."""


class DocumentTooLargeError(IngestionError):
    """A document beyond a size limit (text, rows, pages, chunks, unpacked archive); nothing was kept."""
