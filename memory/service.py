"""Long-term memories per caller: add, list, delete, and recall by a question.

The seed's cross-session memory. A caller is a tenant plus a user; each caller's memories live
under their own namespace of the LangGraph store, so one caller never sees another's. Recall
ranks memories by embedding similarity with Ragline's embedder (e5: "query:" for the question,
"passage:" for memories; vectors come from the embedding cache after the first time), and falls
back to word overlap when no embedder is given or embedding fails.
"""

from __future__ import annotations

import builtins  # MemoryService.list shadows the builtin in its own annotations
import logging
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
from langgraph.store.base import BaseStore, Item

from ragline import defaults
from ragline.models.embeddings import Embedder, EmbeddingError
from ragline.retrieval.tokenizer import tokenize

log = logging.getLogger(__name__)

NAMESPACE_ROOT = ("ragline", "memories")


def _label(value: str) -> str:
    """A namespace label from an id: letters and digits kept, anything else as _hex_ (LangGraph
    refuses '.', and Redis tag queries trip over '@', '-' and friends; ids can be e-mail addresses)."""
    return "".join(c if c.isascii() and c.isalnum() else f"_{ord(c):x}_" for c in (value or "default"))


@dataclass(frozen=True)
class Caller:
    tenant_id: str = "default"
    user_id: str = "default"

    @property
    def namespace(self) -> tuple[str, ...]:
        return (*NAMESPACE_ROOT, _label(self.tenant_id), _label(self.user_id))


@dataclass(frozen=True)
class Memory:
    id: str
    text: str
    created_at: datetime
    metadata: dict[str, Any] = field(default_factory=dict)
    score: float | None = None  # similarity to the question, when recalled

    def event_item(self) -> dict[str, Any]:
        item: dict[str, Any] = {"id": self.id, "content": self.text, "created_at": self.created_at.isoformat()}
        if self.score is not None:
            item["score"] = round(self.score, 4)
        return item


def _memory(item: Item, score: float | None = None) -> Memory:
    value = item.value
    created = value.get("created_at")
    created_at = datetime.fromisoformat(created) if isinstance(created, str) else item.created_at
    return Memory(item.key, str(value.get("text", "")), created_at, dict(value.get("metadata") or {}), score)


def _cosine(query: list[float], passages: list[list[float]]) -> np.ndarray:
    q = np.asarray(query, dtype=np.float32)
    p = np.asarray(passages, dtype=np.float32)
    norms = np.linalg.norm(p, axis=1) * (np.linalg.norm(q) or 1.0)
    return (p @ q) / np.where(norms == 0, 1.0, norms)


def _overlap(query: str, texts: list[str]) -> list[float]:
    """Share of the question's words found in each memory (the fallback without embeddings)."""
    words = set(tokenize(query))
    if not words:
        return [0.0] * len(texts)
    return [len(words & set(tokenize(text))) / len(words) for text in texts]


class MemoryService:
    """Memories of callers in one LangGraph store; cheap to construct per call."""

    def __init__(self, store: BaseStore, embedder: Embedder | None = None) -> None:
        self.store = store
        self.embedder = embedder

    async def add(self, caller: Caller, text: str, metadata: dict[str, Any] | None = None) -> Memory:
        text = text.strip()
        if not text:
            raise ValueError("a memory needs text")
        memory = Memory(uuid.uuid4().hex, text, datetime.now(UTC), dict(metadata or {}))
        value = {"text": memory.text, "created_at": memory.created_at.isoformat(), "metadata": memory.metadata}
        await self.store.aput(caller.namespace, memory.id, value, index=False)
        return memory

    async def list(self, caller: Caller, limit: int = 100, offset: int = 0) -> builtins.list[Memory]:
        """Newest first."""
        return (await self._all(caller))[offset : offset + limit]

    async def delete(self, caller: Caller, memory_id: str) -> bool:
        # looked up through the listing, not aget: RedisStore's get misses keys on Redis 8's search module
        if memory_id not in {m.id for m in await self._all(caller)}:
            return False
        await self.store.adelete(caller.namespace, memory_id)
        return True

    async def search(self, caller: Caller, query: str, limit: int = defaults.MEMORY_RECALL_LIMIT,
                     min_score: float = 0.0, margin: float | None = None) -> builtins.list[Memory]:
        """The caller's memories closest to `query`, best first: at least `min_score` similar and,
        when `margin` is given, within `margin` of the best one.

        Without embeddings the score is word overlap, and any overlap counts.
        """
        memories = await self._all(caller)
        if not memories or not query.strip():
            return []
        texts = [m.text for m in memories]
        scores = await self._similarities(query, texts)
        if scores is None:
            scores, threshold = _overlap(query, texts), 1e-9
        else:
            threshold = max(min_score, max(scores) - margin) if margin is not None else min_score
        ranked = sorted(zip(memories, scores), key=lambda pair: (-pair[1], -pair[0].created_at.timestamp()))
        return [Memory(m.id, m.text, m.created_at, m.metadata, float(s)) for m, s in ranked if s >= threshold][:limit]

    async def _similarities(self, query: str, texts: builtins.list[str]) -> builtins.list[float] | None:
        if self.embedder is None:
            return None
        try:
            query_vector = await self.embedder.embed_query(query)
            vectors = await self.embedder.embed_passages(texts)
        except EmbeddingError as exc:
            log.warning("memory search falls back to word overlap: %s", exc)
            return None
        return [float(s) for s in _cosine(query_vector, vectors)]

    async def _all(self, caller: Caller) -> builtins.list[Memory]:
        items = await self.store.asearch(caller.namespace, limit=defaults.MEMORY_SCAN_LIMIT)
        # asearch matches by prefix: keep this caller's own namespace only
        memories = [_memory(item) for item in items if tuple(item.namespace) == caller.namespace]
        return sorted(memories, key=lambda m: m.created_at, reverse=True)


def render_memory_prompt(memories: list[Memory]) -> str:
    """The memory block for the system prompt (state["memory_prompt"])."""
    if not memories:
        return ""
    lines = "\n".join(f"- {m.text}" for m in memories)
    return f"What you remember about the user from earlier conversations:\n{lines}"
