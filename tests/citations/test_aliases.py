"""AliasTable: stable, low-entropy aliases handed out in registration order."""

from __future__ import annotations

from ragline.citations.aliases import AliasTable


def test_aliases_are_numbered_from_one_in_registration_order():
    table: AliasTable[None] = AliasTable("c")
    assert [table.register(key, key, None) for key in ("x", "y", "z")] == ["c1", "c2", "c3"]


def test_a_source_keeps_its_alias_when_registered_again():
    table: AliasTable[None] = AliasTable("c")
    first = table.register("x", "x", None)
    table.register("y", "y", None)
    assert table.register("x", "x", None) == first
    assert len(table) == 2


def test_resource_aliases_are_zero_padded_to_four_digits():
    table: AliasTable[None] = AliasTable("res://", width=4)
    assert table.register("minio://a", "minio://a", None) == "res://0001"


def test_alias_lookup_ignores_case_and_surrounding_space():
    table: AliasTable[None] = AliasTable("c")
    table.register("x", "value-x", None)
    entry = table.resolve(" C1 ")
    assert entry is not None and entry.value == "value-x"
    assert table.resolve("c2") is None


def test_a_later_registration_fills_metadata_the_first_lacked():
    table: AliasTable[str] = AliasTable("c")
    table.register("x", "x", "", merge=lambda old, new: old or new)
    table.register("x", "x", "title", merge=lambda old, new: old or new)
    assert table.resolve("c1").meta == "title"
