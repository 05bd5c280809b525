import asyncio

import pytest

from ragline.contracts.access import Principal
from ragline.contracts.passages import MatchType
from ragline.retrieval.config import RetrievalConfig
from ragline.retrieval.errors import (
    EmbeddingModelMismatchError,
    KnowledgeBaseAccessError,
    KnowledgeBaseNotFoundError,
    StoreGroupError,
)
from ragline.retrieval.hybrid import (
    HybridSearcher,
    StoreEngines,
    normalized_match_count,
    retrieval_pool_size,
)
from ragline.retrieval.types import NOTHING_HIDDEN, SearchParams
from ragline.retrieval.vector_store import ChromaVectorStore

FACTS = [
    ("eiffel", "The Eiffel Tower in Paris is 330 metres tall."),
    ("wall", "The Great Wall of China is thousands of kilometres long."),
    ("cats", "Cats are small domestic animals that purr."),
]


async def fill(stack, ingestion, name="facts", tenant="default", facts=FACTS, **kb_args):
    kb = stack.knowledge_bases.create(name, tenant_id=tenant, **kb_args)
    await ingestion.ingest_documents(kb.id, [_doc(t, x) for t, x in facts], tenant)
    return kb


def _doc(title, text):
    from ragline.ingestion.service import TextDocument

    return TextDocument(text, title, f"src:{title}")


class RecordingVectorStore:
    """The real Chroma store, remembering the depth each query asked for."""

    def __init__(self, inner, delay: float = 0.0, fail: bool = False):
        self.inner, self.delay, self.fail, self.depths = inner, delay, fail, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def query(self, kb_id, embedding, top_k, knowledge_ids=None, hidden=NOTHING_HIDDEN):
        self.depths.append(top_k)
        if self.fail:
            raise ConnectionError("vector store unreachable")
        await asyncio.sleep(self.delay)
        return await self.inner.query(kb_id, embedding, top_k, knowledge_ids, hidden)


def test_match_count_below_one_normalises_to_50():
    assert normalized_match_count(0) == 50
    assert normalized_match_count(-7) == 50
    assert normalized_match_count(3) == 3


def test_oversampling_is_max_of_five_times_match_and_50_per_kb_capped_at_500():
    assert retrieval_pool_size(1, 1) == 50
    assert retrieval_pool_size(20, 1) == 100
    assert retrieval_pool_size(20, 3) == 300
    assert retrieval_pool_size(60, 2) == 500
    assert retrieval_pool_size(50, 20) == 500


async def test_hybrid_search_finds_the_fact_by_meaning_and_by_words(stack, ingestion):
    kb = await fill(stack, ingestion)
    results = await stack.searcher.search(SearchParams(query="How tall is the Eiffel Tower?", knowledge_base_ids=[kb.id]))
    top = results[0]
    assert top.knowledge_title == "eiffel" and top.match_type == MatchType.HYBRID and top.score > 0.5
    assert all(0.0 <= r.score <= 1.0 for r in results)
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)


async def test_negative_match_count_searches_the_default_pool_and_truncates(stack, ingestion):
    kb = await fill(stack, ingestion)
    recorder = RecordingVectorStore(stack.stores["default"].vector)
    stack.stores["default"] = StoreEngines(recorder, stack.stores["default"].keyword)
    stack.searcher.stores = stack.stores
    results = await stack.searcher.search(SearchParams(query="purring pets", knowledge_base_ids=[kb.id],
                                                       match_count=-1, disable_recall_thresholds=True))
    assert recorder.depths == [250]  # max(50*5, 50) for one KB
    assert len(results) == 3
    one = await stack.searcher.search(SearchParams(query="purring pets", knowledge_base_ids=[kb.id], match_count=1))
    assert len(one) == 1 and one[0].knowledge_title == "cats"


async def test_search_across_kbs_with_different_embedding_models_is_rejected(stack, ingestion):
    first = await fill(stack, ingestion)
    other = stack.knowledge_bases.create("other", embedding_model="openai/text-embedding-3-small")
    with pytest.raises(EmbeddingModelMismatchError):
        await stack.searcher.search(SearchParams(query="towers", knowledge_base_ids=[first.id, other.id]))


async def test_a_tenant_cannot_search_another_tenants_kb_unless_shared(stack, ingestion):
    kb = await fill(stack, ingestion, tenant="acme")
    params = SearchParams(query="towers", knowledge_base_ids=[kb.id], tenant_id="globex")
    with pytest.raises(KnowledgeBaseAccessError):
        await stack.searcher.search(params)
    stack.knowledge_bases.update(kb.id, Principal.operator_of("acme"), shared=True)
    assert await stack.searcher.search(params.model_copy(update={"disable_recall_thresholds": True}))
    with pytest.raises(KnowledgeBaseNotFoundError):
        await stack.searcher.search(SearchParams(query="towers", knowledge_base_ids=["missing"]))


def two_group_searcher(stack, tmp_path, second_vector, timeout=30.0):
    """Stores 'default' and 'second' side by side: KBs in each form two store groups."""
    settings = RetrievalConfig(store_group_timeout_s=timeout)
    stack.stores["second"] = StoreEngines(second_vector, stack.stores["default"].keyword)
    return HybridSearcher(stack.catalog, stack.stores, stack.embedders, settings)


async def test_failure_of_one_store_group_fails_the_whole_search(stack, ingestion, tmp_path):
    broken = RecordingVectorStore(stack.stores["default"].vector, fail=True)
    searcher = two_group_searcher(stack, tmp_path, broken)
    good = await fill(stack, ingestion, "good")
    bad = await fill(stack, ingestion, "bad", vector_store="second", facts=FACTS[:1])
    with pytest.raises(StoreGroupError, match="unreachable"):
        await searcher.search(SearchParams(query="Eiffel Tower", knowledge_base_ids=[good.id, bad.id]))


async def test_a_store_group_slower_than_its_timeout_fails_the_search(stack, ingestion, tmp_path):
    slow = RecordingVectorStore(stack.stores["default"].vector, delay=1.0)
    searcher = two_group_searcher(stack, tmp_path, slow, timeout=0.05)
    good = await fill(stack, ingestion, "good")
    late = await fill(stack, ingestion, "late", vector_store="second", facts=FACTS[:1])
    with pytest.raises(StoreGroupError, match="timed out"):
        await searcher.search(SearchParams(query="Eiffel Tower", knowledge_base_ids=[good.id, late.id]))


async def test_the_query_is_embedded_once_for_every_store_group(stack, ingestion, tmp_path, monkeypatch):
    searcher = two_group_searcher(stack, tmp_path, ChromaVectorStore.persistent(tmp_path / "chroma2"))
    a = await fill(stack, ingestion, "a")
    b = await fill(stack, ingestion, "b", vector_store="second", facts=FACTS[1:])
    calls = []
    original = stack.embedders.default.embed_query

    async def counting(text):
        calls.append(text)
        return await original(text)

    monkeypatch.setattr(stack.embedders.default, "embed_query", counting)
    results = await searcher.search(SearchParams(query="Great Wall", knowledge_base_ids=[a.id, b.id], match_count=10))
    assert calls == ["Great Wall"]
    assert {r.knowledge_base_id for r in results} == {a.id, b.id}


async def test_vector_threshold_drops_weak_hits_unless_thresholds_are_disabled(stack, ingestion):
    kb = await fill(stack, ingestion)
    params = SearchParams(query="quantum chromodynamics", knowledge_base_ids=[kb.id], disable_keyword=True,
                          vector_threshold=0.95)
    assert await stack.searcher.search(params) == []
    assert len(await stack.searcher.search(params.model_copy(update={"disable_recall_thresholds": True}))) == 3


async def test_knowledge_ids_restrict_both_retrievers_to_those_documents(stack, ingestion):
    kb = await fill(stack, ingestion)
    cats = stack.catalog.find_knowledge(kb.id, "src:cats")
    results = await stack.searcher.search(SearchParams(query="Eiffel Tower", knowledge_base_ids=[kb.id],
                                                       knowledge_ids=[cats.id], disable_recall_thresholds=True))
    assert [r.knowledge_id for r in results] == [cats.id]


async def test_results_carry_chunk_index_and_neighbour_ids(stack, ingestion):
    from ragline.retrieval.types import ChunkingConfig

    kb = stack.knowledge_bases.create("long", chunking=ChunkingConfig(chunk_size=60, chunk_overlap=0))
    text = "Alpha sentence about rivers. Beta sentence about mountains. Gamma sentence about deserts."
    await ingestion.ingest_text(kb.id, text, "geo", "src:geo")
    results = await stack.searcher.search(SearchParams(query="mountains", knowledge_base_ids=[kb.id],
                                                       disable_recall_thresholds=True))
    by_index = {r.chunk_index: r for r in results}
    assert sorted(by_index) == [0, 1]
    assert by_index[0].next_chunk_id == by_index[1].id and by_index[1].pre_chunk_id == by_index[0].id
    assert by_index[0].pre_chunk_id is None and by_index[1].next_chunk_id is None
