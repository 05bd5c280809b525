"""A reader's unreadable documents are filtered in every store, before ranking: the vector store
(Chroma and Redis), the keyword index (bm25s and Redis) and the catalog's list of restricted
documents, so a hidden document never takes a place in the top k a readable one would have had."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragline.contracts.access import AccessRule, Principal
from ragline.ingestion.service import IngestionService, TextDocument
from ragline.retrieval.config import RetrievalConfig
from ragline.retrieval.stack import RetrievalStack
from ragline.retrieval.tokenizer import tokenize
from ragline.retrieval.types import NOTHING_HIDDEN, Hidden, SearchParams

# Ten near-copies: a top 3 of the nearest is all restricted unless the filter runs before ranking.
SECRETS = {f"Secret {n}": f"The vault code policy number {n} says the vault opens at dawn." for n in range(10)}
OPEN = {"Open": "The vault policy for visitors: the lobby opens at nine."}


@pytest.fixture(params=["embedded", "shared"])
def backend(request: pytest.FixtureRequest, tmp_path: Path, embedder) -> RetrievalStack:
    redis_url = None
    if request.param == "shared":
        server = request.getfixturevalue("redis_server")
        server.flush()
        redis_url = server.url
    return RetrievalStack.build(tmp_path, embedder, RetrievalConfig(redis_url=redis_url, chroma_url=None))


async def restricted_world(stack: RetrievalStack) -> tuple[str, dict[str, str]]:
    kb = stack.knowledge_bases.create("vault")
    documents = [TextDocument(text, title, f"t:{title}") for title, text in {**SECRETS, **OPEN}.items()]
    stored = await IngestionService(stack).ingest_documents(kb.id, documents)
    ids = {k.title: k.id for k in stored}
    for title in SECRETS:
        stack.knowledge_bases.set_document_access(ids[title], Principal.operator_of("default"), AccessRule(groups=["vault"]))
    return kb.id, ids


async def test_each_store_leaves_hidden_documents_out_before_its_top_k(backend):
    kb, ids = await restricted_world(backend)
    hidden = Hidden({ids[title] for title in SECRETS}, backend.catalog.chunk_ids_of)
    assert set(backend.catalog.restricted_documents([kb])) == hidden.documents
    engines = backend.stores["default"]
    query = "What does the vault policy say?"
    vector = await backend.embedders.for_kb(backend.catalog.get_kb(kb)).embed_query(query)
    nearest = await engines.vector.query(kb, vector, 3, None, hidden)
    keyword = await engines.keyword.search(kb, tokenize(query), 3, None, hidden)
    open_chunks = set(backend.catalog.chunk_ids_of([ids["Open"]]))
    assert {hit.chunk_id for hit in nearest.hits} == open_chunks and {hit.chunk_id for hit in keyword} == open_chunks
    unfiltered = await engines.vector.query(kb, vector, 3, None)
    assert {hit.chunk_id for hit in unfiltered.hits} - open_chunks  # without the filter the secrets crowd the top 3


async def test_a_search_as_a_reader_outside_the_group_finds_only_the_open_document(backend):
    kb, ids = await restricted_world(backend)
    params = SearchParams(query="What does the vault policy say?", knowledge_base_ids=[kb], match_count=3,
                          disable_recall_thresholds=True, reader=Principal("default", "eve", frozenset({"visitors"})))
    assert {hit.knowledge_id for hit in await backend.searcher.search(params)} == {ids["Open"]}
    insider = params.model_copy(update={"reader": Principal("default", "vera", frozenset({"vault"}))})
    assert len({hit.knowledge_id for hit in await backend.searcher.search(insider)} - {ids["Open"]}) >= 2
    nobody = params.model_copy(update={"reader": None})  # no reader given: the tenant with no user, open documents only
    assert {hit.knowledge_id for hit in await backend.searcher.search(nobody)} == {ids["Open"]}


async def test_a_document_ingested_again_keeps_its_rule_and_a_deleted_one_leaves_the_list(backend):
    kb, ids = await restricted_world(backend)
    ingestion = IngestionService(backend)
    await ingestion.ingest_documents(kb, [TextDocument("The vault code policy was changed today.", "Secret 0", "t:Secret 0")])
    assert backend.catalog.get_knowledge(ids["Secret 0"]).access.groups == ["vault"]
    assert ids["Secret 0"] in backend.catalog.restricted_documents([kb])
    await ingestion.delete_knowledge(kb, ids["Secret 1"])
    assert ids["Secret 1"] not in backend.catalog.restricted_documents([kb])


async def test_ingesting_the_same_text_with_a_rule_changes_only_the_rule(backend):
    kb, ids = await restricted_world(backend)
    ingestion = IngestionService(backend)
    chunks = backend.catalog.chunk_ids_of([ids["Open"]])
    again = TextDocument(OPEN["Open"], "Open", "t:Open", access=AccessRule(users=["vera"]))
    (stored,) = await ingestion.ingest_documents(kb, [again])
    assert stored.id == ids["Open"] and stored.access.users == ["vera"] and backend.catalog.chunk_ids_of([ids["Open"]]) == chunks
    assert ids["Open"] in backend.catalog.restricted_documents([kb])


async def test_a_document_restricted_after_the_search_read_the_rules_is_still_left_out(backend, monkeypatch):
    """The stores answer from what the search read first; a document committed or narrowed since
    (its vectors are written before its catalog row) is checked again as the results are made."""
    kb, ids = await restricted_world(backend)
    stale = backend.searcher.readable

    def read_before_the_change(kb_ids, who):
        kbs, _ = stale(kb_ids, who)
        return kbs, NOTHING_HIDDEN  # as if every secret were committed after this read

    monkeypatch.setattr(backend.searcher, "readable", read_before_the_change)
    params = SearchParams(query="What does the vault policy say?", knowledge_base_ids=[kb], match_count=5,
                          disable_recall_thresholds=True, reader=Principal("default", "eve"))
    assert {hit.knowledge_id for hit in await backend.searcher.search(params)} <= {ids["Open"]}  # fewer hits, never a secret


async def test_a_reader_who_may_read_little_still_gets_its_nearest_readable_rows(stack, ingestion):
    """Chroma is asked deeper without a filter first; when the readable rows are too few among
    those, the filtered query runs: the open document is found behind 40 nearer secrets."""
    kb = stack.knowledge_bases.create("deep-vault")
    secrets = [TextDocument(f"The vault code policy number {n} says the vault opens at dawn.", f"Secret {n}", f"s:{n}") for n in range(40)]
    stored = await ingestion.ingest_documents(kb.id, [*secrets, TextDocument(OPEN["Open"], "Open", "t:Open")])
    for knowledge in stored[:-1]:
        stack.knowledge_bases.set_document_access(knowledge.id, Principal.operator_of("default"), AccessRule(groups=["vault"]))
    vector = await stack.embedders.for_kb(kb).embed_query("What does the vault code policy say?")
    for hidden in (Hidden({k.id for k in stored[:-1]}, stack.catalog.chunk_ids_of), Hidden({k.id for k in stored[:-1]})):
        found = await stack.stores["default"].vector.query(kb.id, vector, 3, None, hidden)  # by their chunks; without them, by `$nin`
        assert {hit.chunk_id for hit in found.hits} == set(stack.catalog.chunk_ids_of([stored[-1].id]))


async def test_a_rule_set_anywhere_holds_for_the_next_search(backend, tmp_path: Path, embedder):
    """A reader's hidden documents are kept between searches until a base's stamp moves: a rule set
    through another process's catalog (a replica, on the shared Redis) holds for the next search."""
    kb, ids = await restricted_world(backend)
    other = backend
    if isinstance(backend.config.redis_url, str):  # a second replica's stack on the same Redis
        other = RetrievalStack.build(tmp_path / "replica", embedder, RetrievalConfig(redis_url=backend.config.redis_url, chroma_url=None))
    eve = SearchParams(query="What does the vault policy say?", knowledge_base_ids=[kb], match_count=20,
                       disable_recall_thresholds=True, reader=Principal("default", "eve"))
    assert {hit.knowledge_id for hit in await backend.searcher.search(eve)} == {ids["Open"]}
    other.knowledge_bases.set_document_access(ids["Secret 3"], Principal.operator_of("default"), AccessRule(users=["eve"]))
    assert {hit.knowledge_id for hit in await backend.searcher.search(eve)} == {ids["Open"], ids["Secret 3"]}
    other.knowledge_bases.set_document_access(ids["Secret 3"], Principal.operator_of("default"), AccessRule(groups=["vault"]))
    assert {hit.knowledge_id for hit in await backend.searcher.search(eve)} == {ids["Open"]}
