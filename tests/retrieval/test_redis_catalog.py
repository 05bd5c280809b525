"""The Catalog contract on both backends (SQLite file, Redis 8), and the Redis catalog's all-or-nothing writes."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis as redis_lib

from ragline.contracts.passages import ChunkType
from ragline.retrieval.catalog import Catalog, ChunkRecord, SqliteCatalog
from ragline.retrieval.errors import KnowledgeBaseExistsError
from ragline.retrieval.redis_catalog import PREFIX, RedisCatalog
from ragline.retrieval.types import Knowledge, KnowledgeBase
from tests.redis_server import RedisServer


@pytest.fixture(params=["sqlite", "redis"])
def catalog(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Catalog]:
    if request.param == "sqlite":
        yield SqliteCatalog(tmp_path / "catalog.sqlite")
        return
    server: RedisServer = request.getfixturevalue("redis_server")
    server.flush()
    yield RedisCatalog.from_url(server.url)


def kb(kb_id: str = "kb1", name: str = "manuals", tenant: str = "acme") -> KnowledgeBase:
    return KnowledgeBase(id=kb_id, tenant_id=tenant, name=name, embedding_model="m")


def doc(doc_id: str, source: str, kb_id: str = "kb1") -> Knowledge:
    return Knowledge(id=doc_id, knowledge_base_id=kb_id, tenant_id="acme", title=doc_id, source=source)


def chunks(doc_id: str, texts: list[str], kb_id: str = "kb1", prefix: str = "") -> list[ChunkRecord]:
    ids = [f"{prefix}{doc_id}-c{i}" for i in range(len(texts))]
    return [ChunkRecord(ids[i], kb_id, doc_id, i, text, tokens=text.lower().split(), metadata={"headings": ["H"]},
                        pre_id=ids[i - 1] if i else None, next_id=ids[i + 1] if i + 1 < len(ids) else None)
            for i, text in enumerate(texts)]


def filled(catalog: Catalog) -> Catalog:
    catalog.insert_kb(kb())
    catalog.replace_documents("kb1", [(doc("d1", "src:a"), chunks("d1", ["pump runs on diesel", "valve is red"]), "text a"),
                                      (doc("d2", "src:b"), chunks("d2", ["tea grows in assam"]), "text b")])
    return catalog


def test_knowledge_bases_are_found_by_id_name_and_listed_by_name(catalog):
    catalog.insert_kb(kb("kb2", "zebra"))
    catalog.insert_kb(kb("kb1", "alpha", tenant="globex"))
    assert catalog.get_kb("kb2").name == "zebra" and catalog.get_kb("missing") is None
    assert catalog.find_kb("globex", "alpha").id == "kb1" and catalog.find_kb("acme", "alpha") is None
    assert [k.name for k in catalog.list_kbs()] == ["alpha", "zebra"]
    assert set(catalog.get_kbs(["kb1", "kb2", "missing"])) == {"kb1", "kb2"}


def test_a_taken_name_is_refused_per_tenant(catalog):
    catalog.insert_kb(kb("kb1", "manuals"))
    with pytest.raises((sqlite3.IntegrityError, KnowledgeBaseExistsError)):
        catalog.insert_kb(kb("kb2", "manuals"))
    catalog.insert_kb(kb("kb3", "manuals", tenant="globex"))  # another tenant may use the name


def test_updating_a_kb_renames_it_without_touching_its_revision(catalog):
    filled(catalog)
    revision = catalog.kb_revision("kb1")
    base = catalog.get_kb("kb1")
    base.name, base.description = "renamed", "about pumps"
    catalog.update_kb(base)
    assert catalog.find_kb("acme", "renamed").description == "about pumps"
    assert catalog.find_kb("acme", "manuals") is None and catalog.kb_revision("kb1") == revision


def test_every_document_write_bumps_the_kb_revision(catalog):
    catalog.insert_kb(kb())
    assert catalog.kb_revision("kb1") == 0 and catalog.kb_revision("missing") == -1
    catalog.replace_documents("kb1", [(doc("d1", "src:a"), chunks("d1", ["one"]), "")])
    assert catalog.kb_revision("kb1") == 1
    catalog.delete_knowledge("kb1", ["d1"])
    assert catalog.kb_revision("kb1") == 2 and catalog.get_kb("kb1").revision == 2


def test_documents_and_chunks_read_back_as_written(catalog):
    filled(catalog)
    d1 = catalog.get_knowledge("d1")
    assert d1.chunk_count == 2 and catalog.find_knowledge("kb1", "src:b").id == "d2"
    assert [k.id for k in catalog.list_knowledge("kb1")] == ["d1", "d2"]
    assert set(catalog.get_knowledge_many(["d1", "d2", "nope"])) == {"d1", "d2"}
    assert catalog.source_text("d1") == "text a" and catalog.source_text("nope") is None
    assert sorted(catalog.chunk_ids_of(["d1", "d2"])) == ["d1-c0", "d1-c1", "d2-c0"]
    got = catalog.get_chunks(["d1-c1", "d1-c0", "missing"])
    assert set(got) == {"d1-c0", "d1-c1"}
    assert got["d1-c1"].content == "valve is red" and got["d1-c1"].pre_id == "d1-c0" and got["d1-c1"].tokens == ["valve", "is", "red"]
    assert got["d1-c0"].metadata == {"headings": ["H"]} and got["d1-c0"].knowledge_base_id == "kb1"
    assert [c.id for c in catalog.chunks_of("d1")] == ["d1-c0", "d1-c1"]


def test_the_keyword_corpus_holds_the_indexed_chunks_at_the_current_revision(catalog):
    catalog.insert_kb(kb())
    parts = chunks("d1", ["parent text", "child text"])
    parts[0].indexed, parts[0].chunk_type = False, ChunkType.PARENT
    catalog.replace_documents("kb1", [(doc("d1", "src:a"), parts, "")])
    corpus = catalog.keyword_corpus("kb1")
    assert corpus.revision == catalog.kb_revision("kb1") == 1
    assert corpus.chunk_ids == ["d1-c1"] and corpus.knowledge_ids == ["d1"] and corpus.tokens == [["child", "text"]]
    assert catalog.get_knowledge("d1").chunk_count == 1


def test_replacing_a_document_swaps_all_its_chunks(catalog):
    filled(catalog)
    catalog.replace_documents("kb1", [(doc("d1", "src:a"), chunks("d1", ["pump runs on solar"], prefix="v2-"), "new text")])
    assert catalog.chunk_ids_of(["d1"]) == ["v2-d1-c0"] and catalog.get_chunks(["d1-c0", "d1-c1"]) == {}
    assert catalog.source_text("d1") == "new text" and catalog.get_knowledge("d1").chunk_count == 1
    assert sorted(catalog.keyword_corpus("kb1").chunk_ids) == ["d2-c0", "v2-d1-c0"]


def test_deleting_documents_and_kbs_leaves_nothing(catalog):
    filled(catalog)
    catalog.delete_knowledge("kb1", ["d1"])
    assert catalog.get_knowledge("d1") is None and catalog.find_knowledge("kb1", "src:a") is None
    assert catalog.get_chunks(["d1-c0"]) == {} and catalog.chunk_ids_of(["d1"]) == [] and catalog.source_text("d1") is None
    catalog.delete_kb("kb1")
    assert catalog.get_kb("kb1") is None and catalog.list_kbs() == [] and catalog.list_knowledge("kb1") == []
    assert catalog.get_chunks(["d2-c0"]) == {} and catalog.find_kb("acme", "manuals") is None
    catalog.insert_kb(kb())  # the name is free again


def test_an_image_is_shown_by_the_documents_whose_current_chunks_show_it(catalog):
    filled(catalog)
    catalog.insert_kb(kb("kb2", "other"))
    shown = chunks("d3", ["a picture"], kb_id="kb2")
    shown[0].metadata["images"] = [{"url": "local://images/abc.png"}]
    mention = chunks("d4", ["local://images/abc.png is named in text only"], kb_id="kb2")
    catalog.replace_documents("kb2", [(doc("d3", "src:c", "kb2"), shown, ""), (doc("d4", "src:d", "kb2"), mention, "")])
    assert catalog.documents_showing("local://images/abc.png") == ["d3"]
    catalog.replace_documents("kb2", [(doc("d3", "src:c", "kb2"), chunks("d3", ["no picture now"], "kb2", "v2-"), "")])
    assert catalog.documents_showing("local://images/abc.png") == []


def test_a_failure_midway_through_a_replace_keeps_the_previous_version_whole(catalog):
    """All or nothing: the second document cannot be stored, so neither new version is shown."""
    filled(catalog)
    revision = catalog.kb_revision("kb1")
    bad = chunks("d2", ["tea grows in darjeeling"], prefix="v2-")
    bad[0].metadata["broken"] = object()  # not JSON: the write fails after the first document
    with pytest.raises(TypeError):
        catalog.replace_documents("kb1", [(doc("d1", "src:a"), chunks("d1", ["pump runs on solar"], prefix="v2-"), "new"),
                                          (doc("d2", "src:b"), bad, "new")])
    assert sorted(catalog.chunk_ids_of(["d1", "d2"])) == ["d1-c0", "d1-c1", "d2-c0"]
    assert catalog.get_chunks(["v2-d1-c0"]) == {} and catalog.source_text("d1") == "text a"
    assert catalog.kb_revision("kb1") == revision


# --- Redis only: the staged revision of a writer that died is never visible, and expires ---


def _stage_then_die(url: str) -> None:
    """A writer process killed (SIGKILL) after staging its rows, before its commit."""
    catalog = RedisCatalog.from_url(url)

    def die(*_args, **_kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    catalog._commit = die  # type: ignore[assignment]
    catalog.replace_documents("kb1", [(doc("d1", "src:a"), chunks("d1", ["pump runs on solar"], prefix="v2-"), "new"),
                                      (doc("d9", "src:z"), chunks("d9", ["a new document"]), "new")])


def test_a_writer_killed_between_staging_and_commit_leaves_no_visible_trace(redis_server):
    redis_server.flush()
    catalog = filled(RedisCatalog.from_url(redis_server.url))
    child = multiprocessing.get_context("spawn").Process(target=_stage_then_die, args=(redis_server.url,))
    child.start()
    child.join()
    assert child.exitcode == -signal.SIGKILL
    assert catalog.get_knowledge("d9") is None and catalog.find_knowledge("kb1", "src:z") is None
    assert catalog.get_chunks(["d9-c0", "v2-d1-c0"]) == {} and catalog.chunk_ids_of(["d1"]) == ["d1-c0", "d1-c1"]
    assert catalog.keyword_corpus("kb1").chunk_ids == ["d1-c0", "d1-c1", "d2-c0"] and catalog.kb_revision("kb1") == 1
    client = redis_lib.Redis.from_url(redis_server.url)
    staged = [k for k in client.scan_iter(match=f"{PREFIX}rows:*") if client.ttl(k) >= 0]
    assert len(staged) == 2 and all(0 < client.ttl(k) <= catalog.staging_ttl_s for k in staged)  # they expire


def test_a_commit_refuses_a_staged_revision_that_expired(redis_server):
    redis_server.flush()
    catalog = filled(RedisCatalog.from_url(redis_server.url))
    original = catalog._stage

    def stage_then_expire(knowledge_id, revision, rows, text):
        original(knowledge_id, revision, rows, text)
        catalog.client.delete(f"{PREFIX}rows:{knowledge_id}:{revision}")  # as the TTL would

    catalog._stage = stage_then_expire  # type: ignore[method-assign]
    with pytest.raises(redis_lib.ResponseError, match="incomplete or expired"):
        catalog.replace_documents("kb1", [(doc("d1", "src:a"), chunks("d1", ["new"], prefix="v2-"), "new")])
    assert catalog.chunk_ids_of(["d1"]) == ["d1-c0", "d1-c1"] and catalog.source_text("d1") == "text a"


def test_old_revisions_are_collected_at_commit(redis_server):
    redis_server.flush()
    catalog = filled(RedisCatalog.from_url(redis_server.url))
    for n in range(3):
        catalog.replace_documents("kb1", [(doc("d1", "src:a"), chunks("d1", [f"version {n}"], prefix=f"v{n}-"), f"t{n}")])
    client = redis_lib.Redis.from_url(redis_server.url)
    assert len(list(client.scan_iter(match=f"{PREFIX}rows:d1:*"))) == 1
    assert len(list(client.scan_iter(match=f"{PREFIX}text:d1:*"))) == 1
    assert client.hlen(f"{PREFIX}chunkdoc") == 2  # v2-d1-c0 and d2-c0
