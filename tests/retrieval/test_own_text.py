"""A passage's own hit text, found again after every merge step that changes the text around it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ragline.retrieval.merge import merge_sequential
from ragline.retrieval.merge_images import STORED_IMAGE_SCHEME, prune_markdown_images
from ragline.retrieval.own_text import OWN_SPAN, lent, unexpanded
from ragline.retrieval.searchutil import join_chunk_content
from tests.nodes.results import hit

words = st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta", "sensor", "battery", "12", "cells"]), min_size=1, max_size=12).map(" ".join)


@given(before=words, own=words, after=words)
def test_lent_text_is_taken_back_to_exactly_the_hit(before, own, after):
    short = hit("a", content=f"[{own}]")
    expanded = lent(short, join_chunk_content(join_chunk_content(before, short.content), after))
    assert unexpanded(expanded).content == short.content
    assert "expanded" not in unexpanded(expanded).metadata and OWN_SPAN not in unexpanded(expanded).metadata


@given(before=words, own1=words, own2=words, after=words)
def test_two_neighbouring_hits_joined_keep_both_their_own_texts(before, own1, own2, after):
    first = lent(hit("a", content=f"<{own1}>", chunk_index=1, knowledge_id="d"), f"{before}\n<{own1}>\n{{{own2}}}")
    second = lent(hit("b", content=f"{{{own2}}}", chunk_index=2, knowledge_id="d"), f"<{own1}>\n{{{own2}}}\n{after}")
    (joined,) = merge_sequential([first, second])
    assert joined.content == f"{before}\n<{own1}>\n{{{own2}}}\n{after}"
    assert unexpanded(joined).content == f"<{own1}>\n{{{own2}}}"  # both hits, nothing either borrowed


def test_a_pruned_image_link_before_the_hit_moves_its_span_with_it():
    short = hit("a", content="The battery lasts 18 months.")
    link = f"![chart]({STORED_IMAGE_SCHEME}{'0' * 64}.png)"  # a stored image no result has the info of: pruned
    expanded = lent(short, f"See {link} here.\nThe battery lasts 18 months.\nNext section.")
    (pruned,) = prune_markdown_images([expanded])
    assert "![chart]" not in pruned.content and unexpanded(pruned).content == "The battery lasts 18 months."


def test_a_passage_that_borrowed_nothing_is_its_own_text():
    plain = hit("a", content="whole text")
    assert unexpanded(plain) is plain and unexpanded(lent(plain, "whole text")).content == "whole text"
