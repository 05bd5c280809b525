"""Grounding: after attribution judged every sentence, a contradicted one gives way to the sources'
own words, and an answer with nothing grounded but a made-up number becomes "not found".

Real local embeddings over the sample manual's passages, as in test_attribution.py.
"""

from __future__ import annotations

import pytest

from ragline import defaults
from ragline.citations import Registry, SourceChunk
from ragline.citations.attribution import Attributor, Judgement, Verdict
from ragline.citations.grounding import Review, review
from ragline.citations.tags import UNSUPPORTED_MARK

from .test_attribution import GIVEN, WARRANTY_TAG, answer_registry

GUIDE_ZH = SourceChunk(
    chunk_id="guide-zh-warranty", knowledge_id="guide-zh-doc", knowledge_base_id="kb", title="zh_guide",
    content="控制台和室外传感器享有两年保修。电池和雷击损坏不在保修范围内。",
)


@pytest.fixture
def attributor(embedder) -> Attributor:
    registry = answer_registry()
    registry.render_context([GUIDE_ZH])
    attributor = Attributor.for_answer(registry, [*GIVEN, GUIDE_ZH], embedder, "Are batteries covered by the warranty?")
    assert attributor is not None
    return attributor


async def reviewed(attributor: Attributor, answer: str) -> Review:
    text = await attributor.attribute_text(answer)
    return review(text, attributor.judgements, attributor.tag_for)


async def test_a_sentence_the_sources_contradict_gives_way_to_their_words(attributor):
    """The 1.5B model's answer to the sample manual's question: "covered" against "not covered"."""
    result = await reviewed(attributor, "Yes, batteries are covered by the warranty. Repairs take about ten working days.")
    assert result == Review("The sources say: “Batteries and damage from lightning are not covered.”" + WARRANTY_TAG
                            + " Repairs take about ten working days." + WARRANTY_TAG)


async def test_a_chinese_sentence_the_sources_contradict_is_quoted_in_chinese(attributor):
    result = await reviewed(attributor, "电池在保修范围内。")
    assert result.content.startswith("资料原文：“电池和雷击损坏不在保修范围内。”<kb chunk_id=\"guide-zh-warranty\"")
    assert not result.ungrounded


async def test_a_sentence_the_sources_state_alike_is_kept(attributor):
    answer = "Batteries and damage from lightning are not covered by the warranty."
    assert await reviewed(attributor, answer) == Review(answer + WARRANTY_TAG)


async def test_an_answer_with_nothing_grounded_and_a_made_up_number_is_ungrounded(attributor):
    assert (await reviewed(attributor, "The Aurora weather station costs 150 dollars in most shops.")).ungrounded


async def test_a_made_up_number_beside_a_grounded_claim_only_marks_its_sentence(attributor):
    answer = "Repairs take about ten working days. The Aurora weather station costs 150 dollars in most shops."
    result = await reviewed(attributor, answer)
    assert not result.ungrounded
    assert result.content.endswith("shops." + UNSUPPORTED_MARK)


async def test_an_unsupported_answer_without_numbers_is_kept_marked(attributor):
    """Unsupported is not made up: a paraphrase attribution missed must not turn into "not found"."""
    answer = "The console glows green when the weather will be sunny tomorrow."
    result = await reviewed(attributor, answer)
    assert result == Review(answer + UNSUPPORTED_MARK)


async def test_a_number_the_question_states_is_not_made_up(embedder):
    registry = Registry()
    registry.render_context(GIVEN)
    attributor = Attributor.for_answer(registry, GIVEN, embedder, "What happens after 250 failed pairing attempts?")
    assert attributor is not None
    result = await reviewed(attributor, "After 250 failed pairing attempts the console needs a factory reset.")
    assert not result.ungrounded


def test_the_opposite_needs_most_of_the_clauses_words():
    """Red with OPPOSITE_MIN_SHARE above two thirds: "batteries are covered by the warranty" shares
    two of its three words with "Batteries and damage from lightning are not covered"."""
    assert defaults.OPPOSITE_MIN_SHARE <= 2 / 3


def test_review_leaves_an_answer_no_sentence_of_which_was_judged():
    assert review("Hello.", [], lambda alias: "") == Review("Hello.")
    judged = [Judgement("Costs 150 dollars in shops.", "", Verdict([], judged=True, unsourced_number=True))]
    assert review("Costs 150 dollars in shops.", judged, lambda alias: "") == Review("Costs 150 dollars in shops.")  # claims nothing: no tags


async def test_a_misread_default_gives_way_to_the_sentence_marking_the_default(embedder):
    """Real documents (benchmarks/real_documents.py, bzip2): the model read "100,000 bytes" from a
    sentence that marks 900,000 bytes as the default."""
    page = SourceChunk(chunk_id="bzip2-man", knowledge_id="bzip2-doc", knowledge_base_id="kb", title="bzip2",
                       content="bzip2 compresses files using the Burrows-Wheeler block sorting text compression algorithm. "
                               "The block size affects both the compression ratio achieved, and the amount of memory needed. "
                               "The flags -1 through -9 specify the block size to be 100,000 bytes through 900,000 bytes (the default) respectively.")
    registry = Registry()
    registry.render_context([page])
    attributor = Attributor.for_answer(registry, [page], embedder, "What is the default block size of bzip2?")
    assert attributor is not None
    result = await reviewed(attributor, "The default block size of bzip2 is 100,000 bytes.")
    assert result.content.startswith("The sources say: “The flags -1 through -9 specify the block size to be 100,000 bytes "
                                     "through 900,000 bytes (the default) respectively.”<kb chunk_id=\"bzip2-man\"")
    kept = await reviewed(attributor, "The default block size of bzip2 is 900,000 bytes.")
    assert kept.content.startswith("The default block size of bzip2 is 900,000 bytes.<kb chunk_id=\"bzip2-man\"")
