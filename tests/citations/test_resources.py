"""ResourceTable: stored handles become res://NNNN and come back."""

from __future__ import annotations

from ragline.citations.resources import ResourceTable

SLUG = "summary/5d1c2b3a-aaaa-4bbb-8ccc-dddd00001111"


def test_resource_minio_cos_handles_and_wiki_slugs_get_res_aliases():
    table = ResourceTable()
    text = f"resource://AbCdEfGhIjKlMnOpQrStUv minio://b/a.png cos://x/y.pdf [[{SLUG}|Guide]]"
    assert table.encode_text(text) == "res://0001 res://0002 res://0003 [[res://0004|Guide]]"


def test_the_same_handle_keeps_its_alias_for_the_whole_answer():
    table = ResourceTable()
    table.encode_text("minio://b/a.png")
    table.encode_text("cos://x/y.pdf")
    assert table.encode_text("again minio://b/a.png") == "again res://0001"


def test_trailing_sentence_punctuation_is_not_part_of_the_handle():
    table = ResourceTable()
    assert table.encode_text("See minio://b/a.png. Or cos://x/y.pdf, ok") == "See res://0001. Or res://0002, ok"
    assert table.restore("res://0001") == "minio://b/a.png"


def test_markdown_link_delimiters_end_the_handle():
    table = ResourceTable()
    assert table.encode_text("![d](minio://b/a.png) <minio://b/c>") == "![d](res://0001) <res://0002>"


def test_entity_slugs_and_web_urls_are_left_alone():
    table = ResourceTable()
    text = "entity/Marie-Curie https://example.com/a.png"
    assert table.encode_text(text) == text


def test_tool_arguments_keep_unknown_aliases_so_the_call_can_be_rejected():
    table = ResourceTable()
    table.encode_text("minio://b/a.png")
    assert table.decode_known("res://0001 and res://0009") == "minio://b/a.png and res://0009"
    assert table.unknown_aliases("res://0001 and res://0009") == ["res://0009"]
