"""res://NNNN aliases for stored-resource handles.

Replaces the seed's internal/modelcontext/resources.go (formerly internal/llmresource).
resource://, minio://, cos:// (and other object-store) handles and wiki `summary/<uuid>` slugs
are high-entropy strings a model mangles when it repeats them (a dropped hex digit is a dead
image or a broken wiki link). In model-bound text each one becomes a short res://0001 alias;
streamed output and tool-call arguments get the real handle back.
"""

from __future__ import annotations

import re

from ragline.citations.aliases import AliasTable

STORAGE_SCHEMES = ("minio", "cos", "tos", "s3", "oss", "ks3", "obs", "local")

# `<` is excluded from a handle so a restored value can never open a tag in decoded output.
_STORED_HANDLE = re.compile(
    r"resource://[0-9A-Za-z_-]+"
    r"|(?:storage://[0-9A-Za-z_-]+/)?(?:" + "|".join(STORAGE_SCHEMES) + r")://[^\s)\]>\"'<]+"
    r"|summary/[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)
# Prose puts a full stop or comma right after a link; it is not part of the handle.
_TRAILING_PUNCTUATION = ".,;:!?"

RESOURCE_ALIAS = re.compile(r"(?i)res://\d+")
RESOURCE_ALIAS_PREFIX = "res://"
RESOURCE_ALIAS_WIDTH = 4


class ResourceTable:
    """Stored handle <-> res://NNNN, stable for the whole answer."""

    def __init__(self) -> None:
        self._table: AliasTable[None] = AliasTable(RESOURCE_ALIAS_PREFIX, width=RESOURCE_ALIAS_WIDTH)

    def encode_text(self, text: str) -> str:
        """Replace every stored handle in `text` with its alias."""
        if not text:
            return text
        return _STORED_HANDLE.sub(self._encode_match, text)

    def restore(self, alias: str) -> str | None:
        """The stored handle behind one exact alias, or None when this answer never issued it."""
        entry = self._table.resolve(alias)
        return entry.value if entry is not None else None

    def decode_known(self, text: str) -> str:
        """Restore issued aliases and keep unknown ones.

        For tool arguments: an unknown alias must survive so the tool call can be rejected
        (see `unknown_aliases`) instead of silently running with an empty argument.
        """
        if not text:
            return text
        return RESOURCE_ALIAS.sub(lambda m: self.restore(m.group(0)) or m.group(0), text)

    def unknown_aliases(self, text: str) -> list[str]:
        return sorted({m.group(0) for m in RESOURCE_ALIAS.finditer(text) if self.restore(m.group(0)) is None})

    def __len__(self) -> int:
        return len(self._table)

    def _encode_match(self, match: re.Match[str]) -> str:
        handle = match.group(0)
        stripped = handle.rstrip(_TRAILING_PUNCTUATION)
        suffix = handle[len(stripped) :]
        if not stripped:
            return handle
        return self._table.register(stripped, stripped, None) + suffix
