"""The VectorStore contract on both backends (a Chroma folder, Redis 8 HNSW), and what only Redis adds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ragline.retrieval.errors import RetrievalError
from ragline.retrieval.redis_vectors import RedisVectorStore
from ragline.retrieval.vector_store import ChromaVectorStore, VectorRow, VectorStore

DIMS = 16


@pytest.fixture(params=["chroma", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorStore]:
    if request.param == "chroma":
        yield ChromaVectorStore.persistent(tmp_path / "chroma")
        return
    server = request.getfixturevalue("redis_server")
    server.flush()
    yield RedisVectorStore.from_url(server.url)


@pytest.fixture(scope="module")
def vectors() -> np.ndarray:
    return np.random.default_rng(7).normal(size=(60, DIMS))


def rows(vectors: np.ndarray, docs: int = 3) -> list[VectorRow]:
    return [VectorRow(f"c{i}", f"c{i}", f"k{i % docs}", v.tolist()) for i, v in enumerate(vectors)]


def exact_top(vectors: np.ndarray, query: np.ndarray, k: int, allowed: set[int] | None = None) -> list[str]:
    sims = vectors @ query / (np.linalg.norm(vectors, axis=1) * np.linalg.norm(query))
    order = [i for i in np.argsort(-sims) if allowed is None or i in allowed]
    return [f"c{i}" for i in order[:k]]


async def test_a_query_returns_the_exact_cosine_neighbours_with_similarities(store, vectors):
    await store.upsert("kb", rows(vectors))
    for q in (3, 17, 42):
        got = await store.query("kb", vectors[q].tolist(), 10)
        assert [h.chunk_id for h in got.hits] == exact_top(vectors, vectors[q], 10) and got.filled
        assert got.hits[0].similarity == pytest.approx(1.0, abs=1e-5)
        assert all(0.0 <= h.similarity <= 1.0 for h in got.hits)


async def test_knowledge_ids_restrict_the_neighbours_to_those_documents(store, vectors):
    await store.upsert("kb", rows(vectors))
    got = await store.query("kb", vectors[5].tolist(), 5, knowledge_ids=["k1", "k2"])
    allowed = {i for i in range(len(vectors)) if i % 3 in (1, 2)}
    assert [h.chunk_id for h in got.hits] == exact_top(vectors, vectors[5], 5, allowed)


async def test_fewer_rows_than_asked_is_not_filled_and_an_unknown_kb_is_empty(store, vectors):
    await store.upsert("kb", rows(vectors[:4]))
    got = await store.query("kb", vectors[0].tolist(), 10)
    assert len(got.hits) == 4 and not got.filled
    assert (await store.query("never-written", vectors[0].tolist(), 10)).hits == []


async def test_faq_question_rows_count_once_per_chunk_at_their_closest(store, vectors):
    faq = [VectorRow("f1:0", "f1", "k0", vectors[0].tolist()), VectorRow("f1:1", "f1", "k0", vectors[1].tolist())]
    await store.upsert("kb", faq + rows(vectors[2:10]))
    got = await store.query("kb", vectors[1].tolist(), 5)
    assert [h.chunk_id for h in got.hits].count("f1") == 1 and got.hits[0].chunk_id == "f1"
    await store.delete_chunks("kb", ["f1"])  # both question rows go with their chunk
    assert "f1" not in [h.chunk_id for h in (await store.query("kb", vectors[1].tolist(), 10)).hits]
    assert await store.embeddings("kb", ["f1:0", "f1:1"]) == {}


async def test_upsert_replaces_a_row_and_delete_chunks_removes_rows(store, vectors):
    await store.upsert("kb", rows(vectors[:10]))
    await store.upsert("kb", [VectorRow("c0", "c0", "k0", vectors[20].tolist())])
    assert (await store.query("kb", vectors[20].tolist(), 1)).hits[0].chunk_id == "c0"
    await store.delete_chunks("kb", ["c0", "c1", "unknown"])
    ids = [h.chunk_id for h in (await store.query("kb", vectors[0].tolist(), 10)).hits]
    assert len(ids) == 8 and "c0" not in ids and "c1" not in ids


async def test_embeddings_returns_the_stored_vectors_and_skips_unknown_rows(store, vectors):
    await store.upsert("kb", rows(vectors[:5]))
    got = await store.embeddings("kb", ["c2", "c4", "missing"])
    assert set(got) == {"c2", "c4"}
    np.testing.assert_allclose(got["c2"], vectors[2], rtol=1e-6)  # float32, as stored
    assert await store.embeddings("never-written", ["c2"]) == {}


async def test_deleting_a_kb_drops_its_rows_only_and_twice_is_fine(store, vectors):
    await store.upsert("kb", rows(vectors[:5]))
    await store.upsert("kb2", rows(vectors[5:10]))
    await store.delete_kb("kb")
    await store.delete_kb("kb")
    assert (await store.query("kb", vectors[0].tolist(), 5)).hits == []
    assert len((await store.query("kb2", vectors[5].tolist(), 10)).hits) == 5


# --- Redis only ---


async def test_a_kb_whose_id_extends_another_does_not_see_its_rows(redis_server, vectors):
    redis_server.flush()
    store = RedisVectorStore.from_url(redis_server.url)
    await store.upsert("ab", rows(vectors[:3]))
    await store.upsert("abc", rows(vectors[3:5]))
    assert len((await store.query("ab", vectors[0].tolist(), 10)).hits) == 3


async def test_a_write_of_another_dimension_is_refused(redis_server, vectors):
    redis_server.flush()
    store = RedisVectorStore.from_url(redis_server.url)
    await store.upsert("kb", rows(vectors[:3]))
    with pytest.raises(RetrievalError, match="16-dimensional"):
        await store.upsert("kb", [VectorRow("x", "x", "k", [0.1] * 8)])
