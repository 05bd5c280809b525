"""Shared mode end to end: replicas that share nothing but Redis serve the same knowledge bases, and a
writer killed between its vector writes and its catalog commit leaves nothing any replica can find."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
from pathlib import Path

from ragline.contracts.access import Principal
from ragline.ingestion.service import IngestionService
from ragline.models.embeddings import Embedder
from ragline.retrieval.config import RetrievalConfig
from ragline.retrieval.redis_catalog import RedisCatalog
from ragline.retrieval.redis_keyword import RedisKeywordIndex
from ragline.retrieval.redis_vectors import RedisVectorStore
from ragline.retrieval.stack import RetrievalStack
from ragline.retrieval.types import SearchParams
from tests.vector_rows import vector_row_count

PUMP = "The Aurora pump primes itself in ninety seconds after the red valve is opened."
TEA = "Assam tea is picked twice a year, in spring and in summer."


def replica(data_dir: Path, embedder: Embedder, redis_url: str) -> RetrievalStack:
    return RetrievalStack.build(data_dir, embedder, RetrievalConfig(redis_url=redis_url, chroma_url=None))


async def test_a_document_ingested_on_one_replica_is_found_on_another(redis_server, embedder, tmp_path):
    redis_server.flush()
    a, b = replica(tmp_path / "a", embedder, redis_server.url), replica(tmp_path / "b", embedder, redis_server.url)
    assert isinstance(a.catalog, RedisCatalog) and isinstance(a.stores["default"].vector, RedisVectorStore)
    assert isinstance(a.stores["default"].keyword, RedisKeywordIndex)
    kb = a.knowledge_bases.create("manuals")
    pump = await IngestionService(a).ingest_text(kb.id, PUMP, "pump", "src:pump")
    await IngestionService(a).ingest_text(kb.id, TEA, "tea", "src:tea")

    assert [k.name for k in b.knowledge_bases.list(Principal.operator_of("default"))] == ["manuals"]
    found = await b.searcher.search(SearchParams(query="How long does the pump take to prime?", knowledge_base_ids=[kb.id]))
    assert found and found[0].knowledge_id == pump.id and found[0].content == PUMP

    revision = b.catalog.kb_revision(kb.id)
    await IngestionService(b).delete_knowledge(kb.id, pump.id)  # and a delete on B is seen on A
    assert a.catalog.kb_revision(kb.id) == revision + 1
    again = await a.searcher.search(SearchParams(query="pump prime", knowledge_base_ids=[kb.id], disable_recall_thresholds=True))
    assert pump.id not in {r.knowledge_id for r in again}
    # nothing of the catalog or the vectors went to either replica's disk
    assert not [p for p in (tmp_path / "a").rglob("*") if "catalog" in p.name or "chroma" in p.name]
    assert not [p for p in (tmp_path / "b").rglob("*") if "catalog" in p.name or "chroma" in p.name]


def _ingest_then_die(redis_url: str, data_dir: str, kb_id: str, vector: list[float]) -> None:
    """A writer that stores vectors and keyword rows, stages its catalog rows, and is SIGKILLed at the commit."""
    stack = replica(Path(data_dir), Embedder(model="ragline/multilingual-e5-small"), redis_url)

    async def embed(texts, progress=None):  # no model in the child: the parent's vector stands in for every chunk
        return [vector for _ in texts]

    def die(*_args, **_kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    stack.embedders.default.embed_passages = embed  # type: ignore[method-assign]
    stack.catalog._commit = die  # type: ignore[attr-defined]
    asyncio.run(IngestionService(stack).ingest_text(kb_id, PUMP, "pump", "src:pump"))


async def test_a_writer_killed_before_its_catalog_commit_leaves_the_document_absent_everywhere(redis_server, embedder, tmp_path):
    redis_server.flush()
    a = replica(tmp_path / "a", embedder, redis_server.url)
    kb = a.knowledge_bases.create("manuals")
    await IngestionService(a).ingest_text(kb.id, TEA, "tea", "src:tea")
    query = "How long does the pump take to prime?"
    vector = await embedder.embed_query(query)  # the dead writer's rows are the best match there could be
    child = multiprocessing.get_context("spawn").Process(
        target=_ingest_then_die, args=(redis_server.url, str(tmp_path / "child"), kb.id, vector))
    child.start()
    await asyncio.to_thread(child.join)
    assert child.exitcode == -signal.SIGKILL

    b = replica(tmp_path / "b", embedder, redis_server.url)
    assert vector_row_count(b.stores["default"].vector, kb.id) > 1  # its vectors did reach Redis ...
    assert b.catalog.find_knowledge(kb.id, "src:pump") is None  # ... but the document is absent
    found = await b.searcher.search(SearchParams(query=query, knowledge_base_ids=[kb.id], disable_recall_thresholds=True))
    assert found and {r.content for r in found} == {TEA}  # and no orphan row is ever returned
    assert b.catalog.keyword_corpus(kb.id).chunk_ids == b.catalog.chunk_ids_of([d.id for d in b.catalog.list_knowledge(kb.id)])
