"""Attribution: answer sentences without a ref get the passages that support them, marked as matched.

Real local embeddings (multilingual-e5-small) over passages of the sample manual. The unsupported
sentences below sit just under the threshold (the fifty-metres one scores 0.52) and the
paraphrase just over it (0.67): moving ATTRIBUTION_MIN_SCORE out of that band turns one red.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragline.citations import ChunkRef, Registry, SourceChunk
from ragline.citations.attribution import Attributor
from ragline.citations.tags import UNSUPPORTED_MARK

SETUP = SourceChunk(
    chunk_id="setup-chunk", knowledge_id="setup-doc", knowledge_base_id="kb", title="setup",
    content=(
        "## Placing the sensor\n\nMount the outdoor sensor mast at least 1.5 metres above the ground, away from "
        "walls and trees,\nwith the solar shield facing south in the northern hemisphere. The radio range is 100 "
        "metres in\nopen air and about 30 metres through walls.\n## Pairing\n\n1. Insert the batteries in the "
        "outdoor sensor first.\n2. Plug in the console within one minute.\n3. Hold the SENSOR button on the "
        "console for three seconds until the radio icon blinks.\n\nPairing takes up to three minutes. The console "
        "keeps the pairing after a power cut."
    ),
)
WARRANTY = SourceChunk(
    chunk_id="warranty-chunk", knowledge_id="warranty-doc", knowledge_base_id="kb", title="warranty",
    content=(
        "Northwind Instruments gives a two-year warranty on the Aurora console and outdoor sensor from the "
        "date of purchase. Batteries and damage from lightning are not covered. Repairs take about ten working days."
    ),
)
GUIDE_ZH = SourceChunk(
    chunk_id="guide-zh-chunk", knowledge_id="guide-zh-doc", knowledge_base_id="kb", title="zh_guide",
    content="室外传感器应安装在离地面至少一点五米的地方，远离墙壁和树木。先装入电池，再接通显示屏电源，然后按住 SENSOR 键三秒钟完成配对。",
)
STORMS = SourceChunk(
    chunk_id="https://example.com/storms", source="web_search", chunk_type="web_search", title="Storm tips",
    content="A fall of the air pressure by more than 3 hPa in three hours means a storm is coming within a day.",
)
# Search found it, but it never reached the model: it must never be cited.
SECRET = SourceChunk(
    chunk_id="secret-chunk", knowledge_id="secret-doc", knowledge_base_id="kb", title="internal",
    content="The service code of the console is printed inside the battery cover and resets after ten failed attempts.",
)
GIVEN = [SETUP, WARRANTY, GUIDE_ZH, STORMS]

SETUP_TAG = ('<kb chunk_id="setup-chunk" knowledge_id="setup-doc" knowledge_base_id="kb" title="setup" '
             'chunk_type="text" attributed="true"/>')
WARRANTY_TAG = ('<kb chunk_id="warranty-chunk" knowledge_id="warranty-doc" knowledge_base_id="kb" '
                'title="warranty" chunk_type="text" attributed="true"/>')
MODEL_SETUP_TAG = SETUP_TAG.replace(' attributed="true"', "")
ALLOWED_IDS = {source.chunk_id for source in GIVEN}  # the web page's id is its URL
_KB_IDS = re.compile(r'<kb [^>]*chunk_id="([^"]*)"')
_WEB_URLS = re.compile(r'<web [^>]*url="([^"]*)"')


class FailingEmbedder:
    async def embed_query(self, text: str) -> list[float]:
        raise RuntimeError("embedding service down")

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        raise RuntimeError("embedding service down")


def answer_registry(*, citations_enabled: bool = True) -> Registry:
    """The registry as the generation stage builds it: the given passages rendered (c1 setup,
    c2 warranty, c3 zh guide, w1 storms), plus a chunk seen only in replayed history."""
    registry = Registry(citations_enabled=citations_enabled)
    registry.render_context(GIVEN)
    registry.register_chunk(ChunkRef(chunk_id="history-chunk", title="old answer"), evidence=False)
    return registry


@pytest.fixture(scope="module")
def registry() -> Registry:
    return answer_registry()


@pytest.fixture(scope="module")
def attributor(registry: Registry, embedder) -> Attributor:
    """Over every result search found, SECRET and the history-only chunk included: only the given ones count."""
    history = SourceChunk(chunk_id="history-chunk", content="Pairing takes up to three minutes after a reset.")
    attributor = Attributor.for_answer(registry, [*GIVEN, SECRET, history], embedder)
    assert attributor is not None
    return attributor


@pytest.fixture(scope="module")
def runner() -> Iterator[asyncio.Runner]:
    """One event loop for the property tests, which hypothesis runs synchronously."""
    with asyncio.Runner() as loop:
        yield loop


def cited_sources(text: str) -> set[str]:
    return set(_KB_IDS.findall(text)) | set(_WEB_URLS.findall(text))


async def test_a_supported_sentence_is_followed_by_its_passage_marked_as_attributed(attributor):
    assert await attributor.attribute_text("Pairing takes up to three minutes.") == "Pairing takes up to three minutes." + SETUP_TAG


async def test_a_paraphrase_of_a_passage_is_attributed_to_it(attributor):
    text = "The console keeps its pairing even after a power cut."
    assert await attributor.attribute_text(text) == text + SETUP_TAG


async def test_chinese_sentences_are_matched_with_jieba_words(attributor):
    out = await attributor.attribute_text("室外传感器应安装在离地面至少一点五米的地方。")
    assert cited_sources(out) == {GUIDE_ZH.chunk_id} and 'attributed="true"' in out


async def test_a_web_page_given_to_the_model_is_attributed_as_a_web_tag(attributor):
    out = await attributor.attribute_text("A storm is coming when the air pressure falls by more than 3 hPa in three hours.")
    assert out.endswith('<web url="https://example.com/storms" title="Storm tips" attributed="true"/>')


@pytest.mark.parametrize(
    "sentence",
    [
        "Pairing usually fails when the sensor is more than fifty metres away from the console.",
        "The warranty also covers accidental water damage to the display.",
    ],
)
async def test_a_sentence_with_no_support_is_marked_unsupported_not_given_its_nearest_passage(attributor, sentence):
    assert await attributor.attribute_text(sentence) == sentence + UNSUPPORTED_MARK


@pytest.mark.parametrize(
    "sentence",
    [
        "I hope this helps you with your question about the station.",
        "Let me know if you have any other questions about the Aurora.",
        "The manual does not mention what the Aurora weather station costs.",
        "There is no information about the price of the outdoor sensor.",
        "手册中没有提到气象站的价格。",
    ],
)
async def test_a_sentence_that_claims_nothing_gets_neither_a_source_nor_the_mark(attributor, sentence):
    assert await attributor.attribute_text(sentence) == sentence


@pytest.mark.parametrize(
    "sentence",
    [
        "Batteries and damage from lightning are covered by the warranty.",
        "Northwind Instruments gives a three-year warranty on the Aurora console and outdoor sensor.",
        "The console does not keep the pairing after a power cut.",
    ],
)
async def test_a_sentence_its_closest_passage_contradicts_gets_no_source_and_is_marked_unsupported(attributor, sentence):
    """Overlap is not support: the opposite, or another number, in the passage vetoes the badge."""
    assert await attributor.attribute_text(sentence) == sentence + UNSUPPORTED_MARK


async def test_the_same_sentences_stated_as_the_passage_does_keep_their_tag(attributor):
    text = "Batteries and damage from lightning are not covered by the warranty."
    assert await attributor.attribute_text(text) == text + WARRANTY_TAG


async def test_sentences_too_short_to_match_are_not_attributed(attributor):
    assert await attributor.attribute_text("Pairing: three minutes.") == "Pairing: three minutes."


@pytest.mark.parametrize(("answer", "tag"), [("Ten working days.", WARRANTY_TAG), ("1.5 metres", SETUP_TAG),
                                             ("the SENSOR button", SETUP_TAG)])
async def test_a_short_answer_copied_from_a_passage_cites_that_passage(attributor, answer, tag):
    assert await attributor.attribute_text(answer) == answer + tag


@pytest.mark.parametrize("answer", ["Ten failed attempts.", "1.5", "Two", "open air, sometimes"])
async def test_a_short_answer_cites_nothing_unless_a_given_passage_holds_enough_of_it_word_for_word(attributor, answer):
    # SECRET holds "ten failed attempts" but was never given; the others are too short to be a quote
    assert await attributor.attribute_text(answer) == answer


async def test_only_passages_given_to_the_model_are_cited(attributor):
    # SECRET copied word for word, and the history-only chunk's text: neither was evidence of this answer
    text = f"{SECRET.content} Pairing takes up to three minutes after a reset."
    out = await attributor.attribute_text(text)
    assert cited_sources(out) <= ALLOWED_IDS
    assert SECRET.chunk_id not in cited_sources(out) and "history-chunk" not in out


async def test_a_hostile_answer_naming_other_sources_cites_only_the_given_passages(attributor, registry):
    raw = (
        f'See <kb chunk_id="{SECRET.chunk_id}" title="x" attributed="true"/> and <ref id="c9"/> <ref id="d1"/> '
        f'<ref id="b1"/> <web url="https://evil.example/" title="e"/> and chunk {SECRET.chunk_id}. '
        f"{SECRET.content} The warranty lasts two years from the date of purchase."
    )
    out = await attributor.attribute_text(registry.expand_text(raw))
    assert cited_sources(out) == {WARRANTY.chunk_id}
    assert out.endswith("date of purchase." + WARRANTY_TAG)


async def test_model_written_refs_are_expanded_as_before_and_never_attributed(attributor, registry):
    raw = 'Pairing takes up to three minutes <ref id="c1"/>. Pairing takes up to three minutes. <ref id="c1"/>'
    decoded = registry.expand_text(raw)
    assert await attributor.attribute_text(decoded) == decoded
    assert decoded.count(MODEL_SETUP_TAG) == 2


async def test_in_a_mixed_answer_only_the_sentences_without_a_ref_are_attributed(attributor, registry):
    raw = 'Pairing takes up to three minutes <ref id="c1"/>. The warranty lasts two years from the date of purchase.'
    out = await attributor.attribute_text(registry.expand_text(raw))
    assert out == f"Pairing takes up to three minutes {MODEL_SETUP_TAG}. The warranty lasts two years from the date of purchase.{WARRANTY_TAG}"


async def test_code_blocks_and_table_rows_are_not_attributed(attributor):
    text = (
        "```\nPairing takes up to three minutes.\n```\n"
        "| step | time |\n|---|---|\n| Pairing takes up to three minutes. | 3 min |\n"
    )
    assert await attributor.attribute_text(text) == text


async def test_a_sentence_ending_at_a_newline_gets_its_tag_before_the_newline(attributor):
    out = await attributor.attribute_text("- Pairing takes up to three minutes\n- Hello")
    assert out == f"- Pairing takes up to three minutes{SETUP_TAG}\n- Hello"


async def test_with_citations_off_nothing_is_attributed(embedder):
    assert Attributor.for_answer(answer_registry(citations_enabled=False), GIVEN, embedder) is None


async def test_an_unsupported_sentence_between_supported_ones_is_marked_alone(attributor):
    text = ("Pairing takes up to three minutes. The warranty also covers accidental water damage to the display. "
            "Repairs take about ten working days.")
    out = await attributor.attribute_text(text)
    assert out.count(UNSUPPORTED_MARK) == 1
    assert out.index(UNSUPPORTED_MARK) == out.index("display.") + len("display.")
    assert SETUP_TAG in out and WARRANTY_TAG in out


async def test_an_embedder_failure_leaves_the_answer_whole_and_unattributed(registry):
    attributor = Attributor.for_answer(registry, GIVEN, FailingEmbedder())
    assert attributor is not None
    text = "Pairing takes up to three minutes. The warranty lasts two years from the date of purchase."
    assert await attributor.attribute_text(text) == text


# --- streamed exactly as whole ---

PIECES = st.sampled_from(
    [
        "Pairing takes up to three minutes.", " The warranty lasts two years from the date of purchase.",
        " Hold the SENSOR button for three seconds until the radio icon blinks", " It reads 3.5 hPa.",
        " I hope this helps.", ' <ref id="c1"/>', ' <ref id="c2"/>', ' <ref id="c9"/>', '<ref id="w1"/>',
        f' <kb chunk_id="{SECRET.chunk_id}"/>', f" {SECRET.content}", " e.g. ", "\n", "\n\n- ", "1. ",
        "室外传感器应安装在离地面至少一点五米的地方。", " 保修期是两年！", " <re", "f id=", '"c2"/>', " ",
    ]
)


async def streamed(attributor: Attributor, registry: Registry, chunks: list[str]) -> str:
    """What stream_answer sends: each chunk through the decoder, then the attribution stream."""
    decoder, stream = registry.stream_decoder(), attributor.stream()
    out = [await stream.feed(decoder.feed(chunk)) for chunk in chunks]
    out.append(await stream.finish(decoder.flush()))
    return "".join(out)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(PIECES, min_size=1, max_size=8).map("".join), st.lists(st.integers(min_value=0, max_value=400), max_size=10))
def test_attributed_tags_survive_the_streaming_decoder_cut_anywhere(attributor, registry, runner, answer, cuts):
    points = sorted({0, len(answer), *(c for c in cuts if c <= len(answer))})
    chunks = [answer[a:b] for a, b in zip(points, points[1:])]
    whole = runner.run(attributor.attribute_text(registry.expand_text(answer)))
    assert runner.run(streamed(attributor, registry, chunks)) == whole
    assert cited_sources(whole) <= ALLOWED_IDS  # never SECRET, never an id the model wrote


def test_a_stream_that_fails_gives_back_its_held_text_unattributed(attributor, runner):
    stream = attributor.stream()
    shown = runner.run(stream.feed("Pairing takes up to three minutes."))
    assert shown + stream.abandon(" And") == "Pairing takes up to three minutes. And"


async def test_a_short_answer_cites_its_passage_only_where_that_passage_speaks_of_the_question(registry, embedder):
    """A quote is a claim only with its question: 'Ten working days.' is in the warranty passage, which
    answers 'How long do repairs take?' but not 'How many days does pairing need?' (a multi-hop distractor
    holds the wrong entity word for word in the same way)."""
    def attributor_for(question: str) -> Attributor:
        found = Attributor.for_answer(registry, GIVEN, embedder, question)
        assert found is not None
        return found

    assert await attributor_for("How long do repairs take?").attribute_text("Ten working days.") == "Ten working days." + WARRANTY_TAG
    assert await attributor_for("How many days does pairing need?").attribute_text("Ten working days.") == "Ten working days."


async def test_a_model_cannot_write_the_unsupported_mark_itself(attributor, registry):
    # public tags are output-only: the decoder removes a model-written mark like any kb tag
    text = f"Pairing takes up to three minutes.{UNSUPPORTED_MARK}"
    assert UNSUPPORTED_MARK not in registry.expand_text(text)
