"""The steps of chunk_merge (seed: merge*.go), called directly; the node is in tests/nodes/test_chunk_merge.py."""

from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from ragline.contracts.passages import ChunkType
from ragline.contracts.state import HistoryTurn
from ragline.ingestion.service import TextDocument
from ragline.retrieval import merge as step
from ragline.retrieval.merge_images import prune_markdown_images
from ragline.retrieval.types import ChunkingConfig
from tests.nodes.results import hit


def test_rerank_results_are_the_input_when_there_are_any():
    assert [r.id for r in step.choose_input([hit("r")], [hit("s")], 5)] == ["r"]


def test_without_rerank_results_search_results_are_sorted_and_cut_to_top_k():
    search = [hit("low", score=0.1), hit("high", score=0.9), hit("mid", score=0.5)]
    assert [r.id for r in step.choose_input([], search, 2)] == ["high", "mid"]


# --- history references: overlap coefficient |q∩c| / min(|q|,|c|) >= 0.3 ---


def _reference(id, content):
    return {"id": id, "content": content, "score": 1.0, "knowledge_id": "d", "knowledge_base_id": "kb"}


def _referenced(query, *contents):
    refs = tuple(_reference(f"h{i}", c) for i, c in enumerate(contents))
    return [r.id for r in step.history_references([HistoryTurn("r1", "q", "a", refs)], query)]


# 17 distinct words: replace both lithium cells before every winter season starts to avoid data gaps from a dead unit
WINTER_TIP = "Replace both lithium cells before every winter season starts to avoid data gaps from a dead unit."


def test_history_references_need_an_overlap_of_0_3_and_score_x0_6():
    refs = (_reference("h1", "battery life of the outdoor sensor"), _reference("h2", "completely unrelated words here"))
    injected = step.history_references([HistoryTurn("r1", "q", "a", refs)], "how long is the battery life")
    assert [r.id for r in injected] == ["h1"]
    assert injected[0].score == 0.6 and injected[0].metadata["match_type"] == "history"


def test_a_reference_covering_a_third_of_a_short_question_is_kept_though_their_jaccard_is_0_1():
    # {battery, life, span} vs 8 words: 1 shared -> overlap 1/3, Jaccard 1/10
    assert _referenced("battery life span", "The battery of the outdoor sensor lasts eighteen months.") == ["h0"]


def test_a_reference_sharing_3_of_a_10_word_question_is_kept_at_exactly_0_3():
    # 10 words, 3 shared (lithium, cells, winter) with WINTER_TIP's 17 -> overlap 3/10, Jaccard 3/24
    assert _referenced("which lithium cells power the outdoor weather sensor in winter", WINTER_TIP) == ["h0"]


def test_a_reference_sharing_2_of_a_7_word_question_is_dropped_just_below_0_3():
    # 7 words, 2 shared (lithium, cells) -> overlap 2/7 = 0.286
    assert _referenced("which lithium cells does the sensor need", WINTER_TIP) == []


def test_history_reference_overlap_is_measured_on_the_smaller_side_whichever_it_is():
    # the reference is the smaller side here: {lithium, cells, inside} shares 1 of its 3 words with the 10-word question
    assert _referenced("which lithium batteries power the outdoor weather sensor in winter", "Cells inside? Lithium.") == ["h0"]


def test_at_most_three_history_references_from_the_last_round_that_had_any():
    refs = tuple(_reference(f"h{i}", "battery life") for i in range(5))
    history = [HistoryTurn("r1", "q", "a", refs), HistoryTurn("r2", "q", "a", ())]
    assert len(step.history_references(history, "battery life")) == 3


# --- parents, sequential merge, FAQ answers ---


async def test_a_child_chunk_brings_its_parents_text(ingestion, stack):
    kb = stack.knowledge_bases.create("parents-kb", chunking=ChunkingConfig(parent_child=True, parent_chunk_size=600, child_chunk_size=120, chunk_overlap=0))
    text = "\n\n".join(f"Section {i}. " + "the sensor reports the weather every sixteen seconds. " * 2 for i in range(4))
    [doc] = await ingestion.ingest_documents(kb.id, [TextDocument(text=text, title="t", source="s")])
    children = [c for c in stack.catalog.chunks_of(doc.id) if c.parent_id]
    child = children[0]
    parent = stack.catalog.get_chunks([child.parent_id])[child.parent_id]
    result = hit(child.id, child.content, 0.8, knowledge_id=doc.id, parent_chunk_id=child.parent_id, knowledge_base_id=kb.id)
    resolved = step.resolve_parents([result], stack.catalog)[0]
    assert resolved.content == parent.content and len(parent.content) > len(child.content)
    assert resolved.metadata["child_content"] == child.content


def test_sequential_chunks_of_a_document_join_by_text_keeping_the_best_score():
    merged = step.merge_sequential([hit("c2", "second part", 0.4, chunk_index=2), hit("c1", "first part", 0.9, chunk_index=1)])
    assert len(merged) == 1
    assert merged[0].content == "first part\nsecond part" and merged[0].score == 0.9
    assert merged[0].metadata["sub_chunk_ids"] == ["c1", "c2"]


IMAGE_A = "local://images/" + "a" * 64 + ".png"
IMAGE_B = "local://images/" + "b" * 64 + ".png"


def test_joined_chunks_keep_the_image_info_of_both_and_the_final_prune_keeps_both_images():
    """Seed mergeImageInfo: the second chunk's image survives the join and the last prune."""
    first = hit("c1", f"The console front.\n![console]({IMAGE_A})", 0.9, chunk_index=1,
                metadata={"images": [{"url": IMAGE_A, "caption": "console"}]})
    second = hit("c2", f"The sensor mast.\n![mast]({IMAGE_B})\n![again]({IMAGE_A})", 0.4, chunk_index=2,
                 metadata={"images": [{"url": IMAGE_B, "caption": "mast"}, {"url": IMAGE_A, "caption": "console"}]})
    [merged] = step.merge_sequential([first, second])
    assert [image["url"] for image in merged.metadata["images"]] == [IMAGE_A, IMAGE_B]
    [pruned] = prune_markdown_images([merged])
    assert IMAGE_A in pruned.content and IMAGE_B in pruned.content


def test_overlapping_neighbours_join_without_repeating_the_overlap():
    merged = step.merge_sequential([hit("c1", "alpha beta gamma delta", chunk_index=0), hit("c2", "gamma delta epsilon", chunk_index=1)])
    assert merged[0].content == "alpha beta gamma delta epsilon"


def test_chunks_of_different_documents_or_far_apart_stay_separate():
    merged = step.merge_sequential([hit("a", "one", knowledge_id="d1", chunk_index=1), hit("b", "two", knowledge_id="d2", chunk_index=2), hit("c", "three", knowledge_id="d1", chunk_index=5)])
    assert len(merged) == 3


def test_faq_hits_become_question_and_answers():
    faq = hit("f", "Q: x\nA: y", chunk_type=ChunkType.FAQ, metadata={"standard_question": "How to reset?", "answers": ["Hold RESET.", "Or unplug it."]})
    assert step.fill_faq_answers([faq])[0].content == "Q: How to reset?\nAnswer: Hold RESET.\nOr unplug it."


# --- short-chunk expansion: under 350 characters, up to 850 ---


def _paragraph(label, length):
    """A sentence-like paragraph of exactly `length` characters."""
    text = f"{label} says the sensor reports the weather every sixteen seconds and sleeps in between. " * (length // 40 + 1)
    body = text[: length - 1].rstrip()
    return body + "." * (length - len(body))


async def _middle_chunks(stack, ingestion, middle_lengths):
    """One document per length: paragraphs of 500, `length` and 500 characters, one chunk each."""
    kb = stack.knowledge_bases.create("expand-kb", chunking=ChunkingConfig(chunk_size=512, chunk_overlap=0))
    texts = ["\n\n".join([_paragraph("Alpha", 500), _paragraph("Bravo", length), _paragraph("Charlie", 500)]) for length in middle_lengths]
    docs = await ingestion.ingest_documents(kb.id, [TextDocument(text=t, title=f"t{i}", source=f"s{i}") for i, t in enumerate(texts)])
    middles = []
    for doc in docs:
        before, middle, after = stack.catalog.chunks_of(doc.id)
        assert (len(before.content), len(after.content)) == (500, 500)
        result = hit(middle.id, middle.content, 0.8, knowledge_id=doc.id, chunk_index=middle.chunk_index,
                     pre_chunk_id=middle.pre_id, next_chunk_id=middle.next_id, knowledge_base_id=kb.id)
        middles.append((before.content, result, after.content))
    return middles


async def test_a_349_character_chunk_borrows_its_neighbours_text_up_to_850_characters(stack, ingestion):
    [(before, short, after)] = await _middle_chunks(stack, ingestion, [349])
    assert len(short.content) == 349
    expanded = step.expand_short_chunks([short], stack.catalog)[0]
    # 850 - 349 = 501 borrowed characters: the last 250 of the previous chunk and the first 251 of the next,
    # each seam joined by a newline
    assert expanded.metadata.get("expanded") is True and len(expanded.content) == 850 + 2
    assert expanded.content == before[-250:] + "\n" + short.content + "\n" + after[:251]


async def test_a_350_character_chunk_is_not_expanded(stack, ingestion):
    [(_, chunk, _)] = await _middle_chunks(stack, ingestion, [350])
    assert len(chunk.content) == 350
    unchanged = step.expand_short_chunks([chunk], stack.catalog)[0]
    assert "expanded" not in unchanged.metadata and len(unchanged.content) == 350


async def test_short_chunks_borrow_neighbour_text_from_the_same_document(ingestion, stack):
    kb = stack.knowledge_bases.create("merge-kb", chunking=ChunkingConfig(chunk_size=120, chunk_overlap=0))
    text = "\n\n".join(f"Paragraph {i}: " + "lorem ipsum dolor sit amet " * 3 for i in range(6))
    [doc] = await ingestion.ingest_documents(kb.id, [TextDocument(text=text, title="t", source="s")])
    chunks = stack.catalog.chunks_of(doc.id)
    middle = chunks[2]
    result = hit(middle.id, middle.content, 0.8, knowledge_id=doc.id, chunk_index=middle.chunk_index, pre_chunk_id=middle.pre_id, next_chunk_id=middle.next_id, knowledge_base_id=kb.id)
    expanded = step.expand_short_chunks([result], stack.catalog)[0]
    assert middle.content in expanded.content
    assert len(expanded.content) > len(middle.content) and len(expanded.content) <= 850 + 2
    assert expanded.metadata["expanded"]
    start, end = expanded.metadata["own_span"]
    assert expanded.content[start:end] == middle.content  # where the hit is: a tight context budget keeps only that


# --- partial overlaps: >= 0.85 of the smaller side's tokens shared, sizes within 3x ---


def _overlapping_pair(shared, only_small, only_big):
    """Two passages sharing `shared` tokens; neither text contains the other (the shared tokens run
    in opposite orders), so only the token-overlap rule can drop one. The smaller one scores lower."""
    common = [f"s{i:03d}" for i in range(shared)]
    small = common + [f"a{i:03d}" for i in range(only_small)]
    big = common[::-1] + [f"b{i:03d}" for i in range(only_big)]
    return [hit("big", " ".join(big), 0.9), hit("small", " ".join(small), 0.5)]


def _kept_ids(shared, only_small, only_big):
    return [r.id for r in step.remove_partial_overlaps(_overlapping_pair(shared, only_small, only_big))]


def test_near_duplicates_keep_the_higher_score():
    kept = step.remove_partial_overlaps([hit("a", "the quick brown fox jumps over the lazy dog", 0.5), hit("b", "the quick brown fox jumps over the lazy dog today", 0.9)])
    assert [r.id for r in kept] == ["b"]


def test_a_passage_sharing_86_percent_of_its_tokens_is_removed():
    assert _kept_ids(shared=43, only_small=7, only_big=7) == ["big"]  # 43/50


def test_a_passage_sharing_exactly_85_percent_of_its_tokens_is_removed():
    assert _kept_ids(shared=17, only_small=3, only_big=3) == ["big"]  # 17/20


def test_a_passage_sharing_84_percent_of_its_tokens_is_kept():
    assert _kept_ids(shared=21, only_small=4, only_big=4) == ["big", "small"]  # 21/25


def test_near_duplicates_2_9_or_exactly_3_times_apart_in_size_are_still_removed():
    assert _kept_ids(shared=9, only_small=1, only_big=20) == ["big"]  # 9/10 shared, 29 vs 10 tokens
    assert _kept_ids(shared=9, only_small=1, only_big=21) == ["big"]  # 30 vs 10 tokens


def test_near_duplicates_more_than_3_times_apart_in_size_are_both_kept():
    assert _kept_ids(shared=9, only_small=1, only_big=22) == ["big", "small"]  # 9/10 shared, 31 vs 10 tokens


def test_a_long_page_does_not_swallow_a_short_chunk_by_token_overlap():
    long_text = " ".join(f"word{i}" for i in range(100)) + " alpha beta"
    kept = step.remove_partial_overlaps([hit("long", long_text, 0.9), hit("short", "alpha beta gamma", 0.5)])
    assert {r.id for r in kept} == {"long", "short"}


@given(st.integers(2, 40), st.integers(0, 40), st.data())
def test_the_lower_scored_passage_goes_exactly_when_85_percent_are_shared_within_3x_size(small_size, extra, data):
    shared = data.draw(st.integers(0, small_size))
    big_size = small_size + extra
    kept = _kept_ids(shared=shared, only_small=small_size - shared, only_big=big_size - shared)
    duplicate = big_size <= 3 * small_size and Fraction(shared, small_size) >= Fraction(85, 100)
    assert kept == (["big"] if duplicate else ["big", "small"])


def test_joined_chunks_span_both_locations_and_every_page():
    first = hit("c1", "The pairing starts", chunk_index=1, metadata={"headings": ["Pairing"], "pages": [2], "start": 400, "end": 480})
    second = hit("c2", "and ends with two beeps.", chunk_index=2, metadata={"headings": ["Pairing"], "pages": [2, 3], "start": 470, "end": 560})
    [merged] = step.merge_sequential([second, first])
    assert (merged.metadata["start"], merged.metadata["end"], merged.metadata["pages"]) == (400, 560, [2, 3])
    [partial] = step.merge_sequential([first, hit("c2", "no location recorded", chunk_index=2)])
    assert partial.metadata["start"] is None and partial.metadata["end"] is None  # never half a span
