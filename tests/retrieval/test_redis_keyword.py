"""RedisKeywordIndex on a real Redis 8 with the search module, checked against bm25s."""

from collections.abc import Iterator

import numpy as np
import pytest

from ragline.contracts.access import Principal
from ragline.ingestion.service import TextDocument
from ragline.retrieval.catalog import Catalog, ChunkRecord, SqliteCatalog
from ragline.retrieval.config import RetrievalConfig
from ragline.retrieval.keyword_index import Bm25sKeywordIndex
from ragline.retrieval.redis_keyword import (
    REDIS_BM25_B,
    REDIS_BM25_K1,
    RedisKeywordIndex,
)
from ragline.retrieval.stack import RetrievalStack
from ragline.retrieval.tokenizer import tokenize
from ragline.retrieval.types import Knowledge, KnowledgeBase, SearchParams
from tests.redis_server import RedisServer, missing_reason

CORPUS = [
    "The boundary layer separates from the wing at high angles of attack.",
    "Heat transfer in hypersonic flow over a blunt body.",
    "Slender wings at supersonic speeds: lift and drag measurements of slender wings.",
    "A theory of the turbulent boundary layer with pressure gradient.",
    "Buckling of thin cylindrical shells under axial compression.",
    "Panel flutter of flat plates in supersonic flow, and flutter of panels in subsonic flow.",
    "Laminar heat transfer to a flat plate in hypersonic flow at high Mach number.",
    "Stress analysis of cylindrical shells with cutouts.",
    "长城是中国古代的军事防御工程，绵延上万里。",
    "故宫位于北京，是明清两代的皇家宫殿。",
    "北京的长城以八达岭最为有名。",
    "...",  # no tokens at all: still one of the N documents of the idf
]
QUERIES = ["boundary layer separation", "supersonic flutter of plates", "heat transfer hypersonic flow flow",
           "cylindrical shell buckling", "长城在哪里", "北京的皇家宫殿", "slender wing lift"]


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    if reason := missing_reason():
        pytest.skip(reason)
    with RedisServer() as server:
        yield server


@pytest.fixture
def catalog(tmp_path) -> Catalog:
    catalog = SqliteCatalog(tmp_path / "catalog.sqlite")
    catalog.insert_kb(KnowledgeBase(id="kb", tenant_id="t", name="kb", embedding_model="m"))
    chunks = [ChunkRecord(f"c{i}", "kb", f"doc{i % 3}", i, text, tokens=tokenize(text)) for i, text in enumerate(CORPUS)]
    docs = [Knowledge(id=f"doc{j}", knowledge_base_id="kb", tenant_id="t", title=f"d{j}", source=f"s{j}") for j in range(3)]
    catalog.replace_documents("kb", [(d, [c for c in chunks if c.knowledge_id == d.id], "") for d in docs])
    return catalog


@pytest.fixture
def index(redis_server, catalog) -> RedisKeywordIndex:
    redis_server.flush()
    return RedisKeywordIndex.from_url(redis_server.url, catalog)


def _reference(catalog: Catalog) -> Bm25sKeywordIndex:
    """bm25s with the parameters the search module's BM25STD uses."""
    return Bm25sKeywordIndex(catalog, k1=REDIS_BM25_K1, b=REDIS_BM25_B)


def test_redis_ranks_and_scores_like_bm25s_with_the_same_parameters(index, catalog):
    """Same top results; scores equal up to BM25STD's constant factor k1 + 1."""
    reference = _reference(catalog)
    for query in QUERIES:
        tokens = tokenize(query)
        got, want = index.search_sync("kb", tokens, 5), reference.search_sync("kb", tokens, 5)
        assert got, query
        assert [h.chunk_id for h in got][:3] == [h.chunk_id for h in want][:3], query
        np.testing.assert_allclose([h.score for h in got], [(REDIS_BM25_K1 + 1) * h.score for h in want], rtol=1e-6)


def test_chinese_words_stay_whole_terms(index):
    hits = index.search_sync("kb", tokenize("八达岭长城"), 5)
    assert [h.chunk_id for h in hits][:1] == ["c10"]  # 八达岭 is only in c10; 长城 also in c8
    assert {h.chunk_id for h in hits} == {"c8", "c10"}


def test_document_filter_keeps_the_ranking_of_the_unfiltered_search(index, catalog):
    tokens = tokenize("supersonic flow wings flutter")
    unfiltered = [h for h in index.search_sync("kb", tokens, 20) if int(h.chunk_id[1:]) % 3 == 2]
    filtered = index.search_sync("kb", tokens, 20, knowledge_ids=["doc2"])
    assert [(h.chunk_id, round(h.score, 9)) for h in filtered] == [(h.chunk_id, round(h.score, 9)) for h in unfiltered]
    assert index.search_sync("kb", tokens, 20, knowledge_ids=["no-such-doc"]) == []


async def test_an_index_missing_in_redis_is_filled_from_the_catalog(index, redis_server):
    """A KB ingested before Redis was configured (or a flushed server) is back-filled on first use."""
    assert index.search_sync("kb", tokenize("buckling"), 3)[0].chunk_id == "c4"
    redis_server.flush()
    fresh = RedisKeywordIndex.from_url(redis_server.url, index.catalog)
    assert fresh.search_sync("kb", tokenize("buckling"), 3)[0].chunk_id == "c4"


async def test_written_and_deleted_chunks_and_kbs(index):
    new = ChunkRecord("cnew", "kb", "doc9", 0, "ornithopter wings", tokens=tokenize("ornithopter wings"))
    await index.write("kb", [new])
    assert [h.chunk_id for h in await index.search("kb", tokenize("ornithopter"), 5)] == ["cnew"]
    await index.delete_chunks("kb", ["cnew"])
    assert await index.search("kb", tokenize("ornithopter"), 5) == []
    await index.delete_kb("kb")
    await index.delete_kb("kb")  # twice is not an error
    assert not index._index("kb").exists()


async def test_hybrid_search_through_a_stack_with_redis_keywords(tmp_path, embedder, redis_server):
    redis_server.flush()
    settings = RetrievalConfig(redis_url=redis_server.url, chroma_url=None)
    stack = RetrievalStack.build(tmp_path, embedder, settings)
    assert isinstance(stack.stores["default"].keyword, RedisKeywordIndex)
    from ragline.ingestion.service import IngestionService

    kb = stack.knowledge_bases.create("facts")
    docs = [TextDocument(text, f"t{i}", f"src:{i}") for i, text in enumerate(CORPUS[:4])]
    await IngestionService(stack).ingest_documents(kb.id, docs)
    results = await stack.searcher.search(SearchParams(query="turbulent boundary layer", knowledge_base_ids=[kb.id],
                                                       disable_vector=True))
    assert results and results[0].knowledge_title == "t3"
    await stack.knowledge_bases.delete(kb.id, Principal.operator_of("default"))
    assert not stack.stores["default"].keyword._index(kb.id).exists()
