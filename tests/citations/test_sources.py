"""SourceTable: cN/wN/dN/bN aliases, citable evidence versus navigation-only sources."""

from __future__ import annotations

from ragline.citations.sources import ChunkRef, SourceChunk, SourceTable


def test_a_search_result_registers_its_chunk_document_and_knowledge_base(results):
    table = SourceTable()
    assert table.register_result(results[0]) == "c1"
    assert table.documents.alias_for(results[0].knowledge_id) == "d1"
    assert table.knowledge_bases.alias_for(results[0].knowledge_base_id) == "b1"


def test_web_results_get_w_aliases_and_are_deduplicated_without_their_fragment(results, ids):
    table = SourceTable()
    assert table.register_result(results[3]) == "w1"
    assert table.register_web("https://example.com/releases#other", "Release notes") == "w1"
    assert table.citable_web("w1").url == ids.web_url


def test_source_chunk_accepts_id_as_the_chunk_id():
    assert SourceChunk.model_validate({"id": "abc", "content": "x"}).chunk_id == "abc"


def test_an_alias_shaped_id_never_mints_a_new_source():
    table = SourceTable()
    assert table.register_chunk(ChunkRef(chunk_id="c7")) == ""
    assert table.register_document("d2") == ""
    assert table.register_web("w3") == ""
    assert len(table.chunks) == len(table.documents) == len(table.webs) == 0


def test_an_alias_shaped_id_returns_the_existing_alias():
    table = SourceTable()
    table.register_chunk(ChunkRef(chunk_id="uuid-1"))
    assert table.register_chunk(ChunkRef(chunk_id="C1")) == "c1"


def test_navigation_only_sources_are_addressable_but_not_citable():
    table = SourceTable()
    alias = table.register_chunk(ChunkRef(chunk_id="uuid-1"), evidence=False)
    assert table.durable_for(alias, "chunk") == "uuid-1"
    assert table.citable_chunk(alias) is None
    table.register_chunk(ChunkRef(chunk_id="uuid-1", title="Guide"))
    assert table.citable_chunk(alias) == ChunkRef(chunk_id="uuid-1", title="Guide")


def test_known_ids_are_compacted_only_as_whole_tokens(results, ids):
    table = SourceTable()
    table.register_result(results[0])
    text = f"chunk {ids.guide_chunk}, doc {ids.guide_knowledge}x, kb ({ids.knowledge_base})"
    assert table.compact_known_ids(text) == f"chunk c1, doc {ids.guide_knowledge}x, kb (b1)"


def test_unknown_ids_are_never_guessed_to_be_sources():
    table = SourceTable()
    text = "see 0b9a3f4e-1111-4222-8333-000000000000"
    assert table.compact_known_ids(text) == text
