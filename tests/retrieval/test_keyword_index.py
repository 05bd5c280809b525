import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from ragline.retrieval.catalog import ChunkRecord, SqliteCatalog
from ragline.retrieval.keyword_index import Bm25sKeywordIndex
from ragline.retrieval.tokenizer import tokenize
from ragline.retrieval.types import KnowledgeBase

CORPUS = [
    "The boundary layer separates from the wing at high angles of attack.",
    "Heat transfer in hypersonic flow over a blunt body.",
    "Slender wings at supersonic speeds: lift and drag measurements.",
    "A theory of the turbulent boundary layer with pressure gradient.",
    "Buckling of thin cylindrical shells under axial compression.",
    "Panel flutter of flat plates in supersonic flow.",
    "Laminar heat transfer to a flat plate in hypersonic flow.",
    "Stress analysis of cylindrical shells with cutouts.",
    "长城是中国古代的军事防御工程，绵延上万里。",
    "故宫位于北京，是明清两代的皇家宫殿。",
]
QUERIES = ["boundary layer separation", "supersonic flutter of plates", "heat transfer hypersonic",
           "cylindrical shell buckling", "长城在哪里", "北京的皇家宫殿"]


@pytest.fixture
def index(tmp_path) -> Bm25sKeywordIndex:
    catalog = SqliteCatalog(tmp_path / "catalog.sqlite")
    catalog.insert_kb(KnowledgeBase(id="kb", tenant_id="t", name="kb", embedding_model="m"))
    chunks = [ChunkRecord(f"c{i}", "kb", f"doc{i % 3}", i, text, tokens=tokenize(text)) for i, text in enumerate(CORPUS)]
    from ragline.retrieval.types import Knowledge

    docs = {f"doc{j}": Knowledge(id=f"doc{j}", knowledge_base_id="kb", tenant_id="t", title=f"d{j}", source=f"s{j}")
            for j in range(3)}
    catalog.replace_documents("kb", [(docs[d], [c for c in chunks if c.knowledge_id == d], "") for d in docs])
    return Bm25sKeywordIndex(catalog, k1=1.5, b=0.75)


def test_bm25s_robertson_scores_equal_rank_bm25_okapi_up_to_the_constant_k1_plus_1(index):
    """rank-bm25 is the reference. bm25s leaves out Okapi's constant (k1 + 1) numerator factor,
    which scales every score alike and changes no ranking; with it put back the numbers agree."""
    corpus = index.catalog.keyword_corpus("kb")
    reference = BM25Okapi(corpus.tokens, k1=1.5, b=0.75)
    robertson = Bm25sKeywordIndex(index.catalog, k1=1.5, b=0.75, method="robertson").build(corpus.tokens)
    for query in QUERIES:
        tokens = tokenize(query)
        # rank-bm25 floors negative idf (terms in more than half the documents); ours never are.
        np.testing.assert_allclose(robertson.get_scores(tokens) * 2.5, reference.get_scores(tokens), rtol=1e-5, atol=1e-6)


def test_served_lucene_ranking_matches_rank_bm25_top_results(index):
    corpus = index.catalog.keyword_corpus("kb")
    reference = BM25Okapi(corpus.tokens, k1=1.5, b=0.75)
    for query in QUERIES:
        tokens = tokenize(query)
        ref_scores = reference.get_scores(tokens)
        expected = [corpus.chunk_ids[i] for i in np.argsort(-ref_scores, kind="stable") if ref_scores[i] > 0][:3]
        got = [h.chunk_id for h in index.search_sync("kb", tokens, 3)]
        assert got == expected, query


def test_knowledge_filter_only_returns_chunks_of_those_documents(index):
    hits = index.search_sync("kb", tokenize("supersonic flow"), 10, knowledge_ids=["doc2"])
    assert hits and all(int(h.chunk_id[1:]) % 3 == 2 for h in hits)


def test_index_rebuilds_when_the_catalog_revision_moves(index):
    assert index.search_sync("kb", tokenize("ornithopter"), 5) == []
    from ragline.retrieval.types import Knowledge

    doc = Knowledge(id="new", knowledge_base_id="kb", tenant_id="t", title="n", source="n")
    chunk = ChunkRecord("cnew", "kb", "new", 0, "ornithopter wings", tokens=tokenize("ornithopter wings"))
    index.catalog.replace_documents("kb", [(doc, [chunk], "")])
    assert [h.chunk_id for h in index.search_sync("kb", tokenize("ornithopter"), 5)] == ["cnew"]


def test_query_without_known_terms_returns_nothing(index):
    assert index.search_sync("kb", ["zzz"], 5) == []
    assert index.search_sync("kb", [], 5) == []
