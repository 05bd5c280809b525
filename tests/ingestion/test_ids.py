"""A document revision re-run after its writer died mid-write leaves one copy of its vectors."""

from __future__ import annotations

import asyncio

import pytest

from ragline.ingestion.ids import new_id, revision_ids
from ragline.ingestion.service import TextDocument
from tests.vector_rows import vector_row_count

TEXT = "\n\n".join(f"Valve {i} of the Aurora pump opens a quarter turn at {i * 7} kPa." for i in range(12))


def test_ids_repeat_within_one_revision_and_differ_outside_it():
    with revision_ids("job-1"):
        first = [new_id() for _ in range(3)]
    with revision_ids("job-1"):
        again = [new_id() for _ in range(3)]
    with revision_ids("job-2"):
        other = new_id()
    assert first == again and len(set(first)) == 3 and other not in first
    assert new_id() != new_id()  # outside a revision: random


def vector_count(stack, kb_id: str) -> int:
    return vector_row_count(stack.stores["default"].vector, kb_id)


async def test_a_rerun_after_a_death_between_vectors_and_catalog_leaves_one_copy(stack, ingestion, monkeypatch):
    kb = stack.knowledge_bases.create("revisions")
    commit = stack.catalog.replace_documents

    def die(*args, **kwargs):  # the process "dies" after the vectors were written, before the catalog commit
        raise asyncio.CancelledError

    monkeypatch.setattr(stack.catalog, "replace_documents", die)
    with revision_ids("job-1"), pytest.raises(asyncio.CancelledError):
        await ingestion.ingest_documents(kb.id, [TextDocument(TEXT, "pump", "src:pump")])
    orphans = vector_count(stack, kb.id)
    assert orphans > 0 and stack.catalog.find_knowledge(kb.id, "src:pump") is None  # invisible, but stored
    monkeypatch.setattr(stack.catalog, "replace_documents", commit)
    with revision_ids("job-1"):  # the retried job
        [document] = await ingestion.ingest_documents(kb.id, [TextDocument(TEXT, "pump", "src:pump")])
    indexed = [c for c in stack.catalog.chunks_of(document.id) if c.indexed]
    assert vector_count(stack, kb.id) == orphans == len(indexed)
