from ragline.graph.context import RunContext
from ragline.graph.request import PipelineRequest
from ragline.graph.state import HistoryTurn
from ragline.ingestion.service import TextDocument
from ragline.retrieval import merge as step
from ragline.nodes.chunk_merge import chunk_merge
from ragline.retrieval.types import ChunkType

from tests.nodes.results import hit


def test_rerank_results_are_the_input_when_there_are_any():
    assert [r.id for r in step.choose_input([hit("r")], [hit("s")], 5)] == ["r"]


def test_without_rerank_results_search_results_are_sorted_and_cut_to_top_k():
    search = [hit("low", score=0.1), hit("high", score=0.9), hit("mid", score=0.5)]
    assert [r.id for r in step.choose_input([], search, 2)] == ["high", "mid"]


def test_history_references_need_an_overlap_of_0_3_and_score_x0_6():
    refs = ({"id": "h1", "content": "battery life of the outdoor sensor", "score": 1.0, "knowledge_id": "d", "knowledge_base_id": "kb"},
            {"id": "h2", "content": "completely unrelated words here", "score": 1.0, "knowledge_id": "d", "knowledge_base_id": "kb"})
    injected = step.history_references([HistoryTurn("r1", "q", "a", refs)], "how long is the battery life")
    assert [r.id for r in injected] == ["h1"]
    assert injected[0].score == 0.6 and injected[0].metadata["match_type"] == "history"


def test_at_most_three_history_references_from_the_last_round_that_had_any():
    refs = tuple({"id": f"h{i}", "content": "battery life", "score": 1.0, "knowledge_id": "d", "knowledge_base_id": "kb"} for i in range(5))
    history = [HistoryTurn("r1", "q", "a", refs), HistoryTurn("r2", "q", "a", ())]
    assert len(step.history_references(history, "battery life")) == 3


def test_sequential_chunks_of_a_document_join_by_text_keeping_the_best_score():
    merged = step.merge_sequential([hit("c2", "second part", 0.4, chunk_index=2), hit("c1", "first part", 0.9, chunk_index=1)])
    assert len(merged) == 1
    assert merged[0].content == "first part\nsecond part" and merged[0].score == 0.9
    assert merged[0].metadata["sub_chunk_ids"] == ["c1", "c2"]


def test_overlapping_neighbours_join_without_repeating_the_overlap():
    merged = step.merge_sequential([hit("c1", "alpha beta gamma delta", chunk_index=0), hit("c2", "gamma delta epsilon", chunk_index=1)])
    assert merged[0].content == "alpha beta gamma delta epsilon"


def test_chunks_of_different_documents_or_far_apart_stay_separate():
    merged = step.merge_sequential([hit("a", "one", knowledge_id="d1", chunk_index=1), hit("b", "two", knowledge_id="d2", chunk_index=2), hit("c", "three", knowledge_id="d1", chunk_index=5)])
    assert len(merged) == 3


def test_faq_hits_become_question_and_answers():
    faq = hit("f", "Q: x\nA: y", chunk_type=ChunkType.FAQ, metadata={"standard_question": "How to reset?", "answers": ["Hold RESET.", "Or unplug it."]})
    assert step.fill_faq_answers([faq])[0].content == "Q: How to reset?\nAnswer: Hold RESET.\nOr unplug it."


def test_near_duplicates_keep_the_higher_score():
    kept = step.remove_partial_overlaps([hit("a", "the quick brown fox jumps over the lazy dog", 0.5), hit("b", "the quick brown fox jumps over the lazy dog today", 0.9)])
    assert [r.id for r in kept] == ["b"]


def test_a_long_page_does_not_swallow_a_short_chunk_by_token_overlap():
    long_text = " ".join(f"word{i}" for i in range(100)) + " alpha beta"
    kept = step.remove_partial_overlaps([hit("long", long_text, 0.9), hit("short", "alpha beta gamma", 0.5)])
    assert {r.id for r in kept} == {"long", "short"}


async def test_short_chunks_borrow_neighbour_text_from_the_same_document(ingestion, stack, services):
    from ragline.retrieval.types import ChunkingConfig

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


async def test_merge_node_runs_the_steps_end_to_end(services):
    class Runtime:
        context = RunContext(services=services)

    state = {"request": PipelineRequest(query="q", rerank_top_k=5), "rerank_results": [hit("a", "x y z", 0.9), hit("a", "x y z", 0.9)], "history": []}
    update = await chunk_merge(state, Runtime())
    assert [r.id for r in update["merge_results"]] == ["a"]


async def test_a_child_chunk_brings_its_parents_text(ingestion, stack):
    from ragline.retrieval.types import ChunkingConfig

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
