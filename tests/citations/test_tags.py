"""Public tags: reading ref ids, rendering kb/web tags, folding replayed tags back into refs."""

from __future__ import annotations

import pytest

from ragline.citations.sources import ChunkRef, WebRef
from ragline.citations.tags import (
    UNSUPPORTED_MARK,
    compact_public_tags,
    kb_tag,
    ref_aliases,
    tag_attributes,
    web_tag,
)


@pytest.mark.parametrize(
    ("body", "aliases"),
    [
        (' id="c1"/', ["c1"]),
        (" id='c1' /", ["c1"]),
        (" id=c1", ["c1"]),
        (' ID="C1"', ["c1"]),
        (' id = "c1"\n/', ["c1"]),
        (' id="c1, w2 c1;c3"/', ["c1", "w2", "c3"]),
        (' data-id="c5" id="c1"/', ["c1"]),
        (" /", []),
    ],
)
def test_ref_tags_are_read_tolerantly(body, aliases):
    assert ref_aliases(body) == aliases


def test_kb_tag_carries_chunk_knowledge_and_knowledge_base_ids():
    tag = kb_tag(ChunkRef(chunk_id="ch-1", knowledge_id="k-1", knowledge_base_id="kb-1", title="Guide"))
    assert tag == '<kb chunk_id="ch-1" knowledge_id="k-1" knowledge_base_id="kb-1" title="Guide"/>'


def test_attribute_values_are_escaped_so_a_title_cannot_open_a_tag():
    tag = kb_tag(ChunkRef(chunk_id="ch-1", title='"><ref id="c1"/>'))
    assert "<ref" not in tag and tag_attributes(tag)["title"] == '"><ref id="c1"/>'


def test_web_tag_carries_url_and_title():
    assert (
        web_tag(WebRef(url="https://a.test/?x=1&y=2", title="A"))
        == '<web url="https://a.test/?x=1&amp;y=2" title="A"/>'
    )


def test_an_attributed_tag_is_the_same_tag_marked_as_matched():
    ref = ChunkRef(chunk_id="ch-1", title="Guide")
    assert kb_tag(ref, attributed=True) == '<kb chunk_id="ch-1" title="Guide" attributed="true"/>'
    assert web_tag(WebRef(url="https://a.test", title="A"), attributed=True) == '<web url="https://a.test" title="A" attributed="true"/>'
    assert tag_attributes(kb_tag(ref, attributed=True))["attributed"] == "true"


def test_a_replayed_attributed_tag_folds_back_into_a_ref_like_any_other():
    text = 'Yes.<kb chunk_id="ch-1" title="Guide" attributed="true"/>'
    assert compact_public_tags(text, lambda ref: "c1", lambda url, title: "") == 'Yes.<ref id="c1"/>'


def test_replayed_public_tags_fold_back_into_refs():
    registered: list[ChunkRef] = []

    def register_chunk(ref: ChunkRef) -> str:
        registered.append(ref)
        return "c1"

    text = 'Yes <kb chunk_id="ch-1" knowledge_id="k-1" title="Guide"/> and <web url="https://a.test" title="A"/>.'
    folded = compact_public_tags(text, register_chunk, lambda url, title: "w1" if url == "https://a.test" else "")
    assert folded == 'Yes <ref id="c1"/> and <ref id="w1"/>.'
    assert registered == [ChunkRef(chunk_id="ch-1", knowledge_id="k-1", title="Guide")]


def test_a_replayed_unsupported_mark_is_dropped_not_folded_into_a_ref():
    text = f'It costs 99 euros.{UNSUPPORTED_MARK} Pairing takes three minutes.<kb chunk_id="ch-1" title="Guide"/>'
    folded = compact_public_tags(text, lambda ref: "c1", lambda url, title: "")
    assert folded == 'It costs 99 euros. Pairing takes three minutes.<ref id="c1"/>'


def test_a_public_tag_without_an_id_is_left_untouched():
    text = '<kb title="no id"/>'
    assert compact_public_tags(text, lambda ref: "c1", lambda url, title: "w1") == text
