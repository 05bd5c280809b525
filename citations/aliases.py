"""One bidirectional alias space: durable identity <-> short answer-local alias.

Replaces the seed's `handleTable[M]` (internal/modelcontext/handle_table.go), the primitive behind
every handle space (cN, dN, bN, wN and res://NNNN). An alias is handed out once per key, in
registration order, and never renumbered: a source keeps its alias across every model call of
the answer, so the model can refer back to it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

M = TypeVar("M")


@dataclass(slots=True)
class AliasEntry(Generic[M]):
    """What an alias stands for: the durable value shown outside the model, plus metadata."""

    alias: str
    value: str
    meta: M


class AliasTable(Generic[M]):
    """Hands out `prefix + number` aliases; `width` zero-pads the number (res://0001)."""

    def __init__(self, prefix: str, *, width: int = 0) -> None:
        self._prefix = prefix
        self._width = width
        self._by_key: dict[str, AliasEntry[M]] = {}
        self._by_alias: dict[str, AliasEntry[M]] = {}
        # Agent tools may register from worker threads while a stream decodes.
        self._lock = threading.Lock()

    def register(
        self,
        key: str,
        value: str,
        meta: M,
        merge: Callable[[M, M], M] | None = None,
    ) -> str:
        """Return the alias for `key`, creating it on first sight.

        A repeated key keeps its alias; `merge` lets a later, richer registration fill metadata
        the first one lacked (a chunk first seen in history without its title, say).
        """
        with self._lock:
            entry = self._by_key.get(key)
            if entry is not None:
                if merge is not None:
                    entry.meta = merge(entry.meta, meta)
                return entry.alias
            alias = f"{self._prefix}{len(self._by_key) + 1:0{self._width}d}"
            entry = AliasEntry(alias=alias, value=value, meta=meta)
            self._by_key[key] = entry
            self._by_alias[alias.lower()] = entry
            return alias

    def alias_for(self, key: str) -> str | None:
        entry = self._by_key.get(key)
        return entry.alias if entry is not None else None

    def resolve(self, alias: str) -> AliasEntry[M] | None:
        """Look an alias up case-insensitively: models sometimes write C1 for c1."""
        return self._by_alias.get(alias.strip().lower())

    def entries(self) -> list[AliasEntry[M]]:
        with self._lock:
            return list(self._by_key.values())

    def __len__(self) -> int:
        return len(self._by_key)
