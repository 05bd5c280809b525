import json

from ragline.ingestion.faq_import import FAQEntry, import_faq_file, upsert_faq
from ragline.retrieval.faq import deepening_depths
from ragline.retrieval.types import FAQIndexMode, KnowledgeBaseType, SearchParams
from tests.vector_rows import vector_row_count

ENTRY = FAQEntry(standard_question="How do I reset the rain total?",
                 similar_questions=["Clear rainfall counter"],
                 negative_questions=["How do I reset the console?"],
                 answers=["Hold the RAIN button for five seconds."])


def faq_kb(stack, mode=FAQIndexMode.QUESTION_ANSWER):
    return stack.knowledge_bases.create("faq", type=KnowledgeBaseType.FAQ, faq_index_mode=mode)


def vector_count(stack, kb):
    return vector_row_count(stack.stores["default"].vector, kb.id)


async def test_negative_questions_are_never_indexed(stack, ingestion):
    kb = faq_kb(stack)
    await upsert_faq(ingestion, kb.id, [ENTRY])
    assert vector_count(stack, kb) == 2  # the standard and the similar question only


async def test_a_query_equal_to_a_negative_question_drops_that_entry(stack, ingestion):
    kb = faq_kb(stack)
    await upsert_faq(ingestion, kb.id, [ENTRY])
    params = SearchParams(query="how do I reset the  CONSOLE?", knowledge_base_ids=[kb.id], disable_recall_thresholds=True)
    assert await stack.searcher.search(params) == []
    hit = await stack.searcher.search(params.model_copy(update={"query": "reset the rain total"}))
    assert hit[0].metadata["answers"] == ENTRY.answers and hit[0].content.startswith("Q: How do I reset")


async def test_faq_kbs_are_searched_by_vector_only(stack, ingestion):
    kb = faq_kb(stack, FAQIndexMode.QUESTION_ONLY)
    await upsert_faq(ingestion, kb.id, [ENTRY])
    results = await stack.searcher.search(SearchParams(query="Clear rainfall counter", knowledge_base_ids=[kb.id]))
    assert results[0].match_type.value == "vector" and results[0].score > 0.95  # identical to a similar question


def test_deepening_doubles_the_first_depth_at_most_five_times_up_to_the_cap():
    assert list(deepening_depths(10)) == [20, 40, 80, 160, 320]
    assert list(deepening_depths(50)) == [100, 200, 400, 500]
    assert list(deepening_depths(500)) == []


async def test_too_few_faq_hits_from_a_full_vector_list_search_deeper(stack, ingestion):
    """Two entries with 40 questions each fill a 50-row vector list with only two distinct entries."""
    kb = faq_kb(stack, FAQIndexMode.QUESTION_ONLY)
    entries = [FAQEntry(standard_question=f"{topic} question 0", answers=[f"{topic} answer"],
                        similar_questions=[f"{topic} question {i}" for i in range(1, 40)]) for topic in ("tea", "coffee")]
    await upsert_faq(ingestion, kb.id, entries)
    depths = []
    inner = stack.stores["default"].vector.query

    async def recording(kb_id, embedding, top_k, knowledge_ids=None, hidden=()):
        depths.append(top_k)
        return await inner(kb_id, embedding, top_k, knowledge_ids, hidden)

    stack.stores["default"].vector.query = recording
    results = await stack.searcher.search(SearchParams(query="tea question", knowledge_base_ids=[kb.id], match_count=3,
                                                       disable_recall_thresholds=True))
    assert depths == [50, 100]  # the second round (80 rows < 100) was not full, so deepening stopped
    assert len(results) == 2


async def test_csv_import_dry_run_reports_rejected_rows_and_stores_nothing(stack, ingestion, tmp_path):
    kb = faq_kb(stack)
    path = tmp_path / "faq.csv"
    path.write_text(
        "standard_question,similar_questions,negative_questions,answers\n"
        "How long is the warranty?,Warranty period|Guarantee length,,Two years.\n"
        ",orphan,,No question\n"
        "Where is the serial number?,,,\n"
        "How long is the warranty?,,,Duplicate.\n"
        "Is it waterproof?,,Is it waterproof?,Splash-proof only.\n", encoding="utf-8")
    report = await import_faq_file(ingestion, kb.id, path, dry_run=True)
    assert report.accepted == 1 and report.imported == 0
    assert [r.row for r in report.rejected] == [2, 3, 4, 5]
    assert "duplicate" in report.rejected[2].reason and "negative" in report.rejected[3].reason
    assert stack.catalog.list_knowledge(kb.id) == []
    report = await import_faq_file(ingestion, kb.id, path)
    assert report.imported == 1 and vector_count(stack, kb) == 3


async def test_json_import_reads_lists_and_replaces_an_entry_by_its_question(stack, ingestion, tmp_path):
    kb = faq_kb(stack)
    path = tmp_path / "faq.json"
    path.write_text(json.dumps([{"standard_question": "保修多久？", "answers": ["两年。"]}, "junk"], ensure_ascii=False),
                    encoding="utf-8")
    report = await import_faq_file(ingestion, kb.id, path)
    assert report.imported == 1 and report.rejected[0].reason == "not an object"
    path.write_text(json.dumps([{"standard_question": "保修 多久？", "answers": ["三年。"]}], ensure_ascii=False),
                    encoding="utf-8")
    await import_faq_file(ingestion, kb.id, path)
    docs = stack.catalog.list_knowledge(kb.id)
    assert len(docs) == 1 and "三年" in stack.catalog.chunks_of(docs[0].id)[0].content


async def test_an_upsert_cut_short_keeps_the_batches_it_finished_and_a_rerun_embeds_only_the_rest(stack, ingestion, monkeypatch):
    import pytest

    from ragline import defaults

    monkeypatch.setattr(defaults, "FAQ_WRITE_BATCH", 2)
    kb = faq_kb(stack, FAQIndexMode.QUESTION_ONLY)
    entries = [FAQEntry(standard_question=f"Question {i}?", answers=[f"Answer {i}."]) for i in range(5)]
    real_write, writes = ingestion.write, []

    async def write(kb_, docs, progress=None, before_commit=None):
        writes.append(len(docs))
        if len(writes) == 3:
            raise RuntimeError("the embedder went away")
        return await real_write(kb_, docs, progress, before_commit)

    monkeypatch.setattr(ingestion, "write", write)
    with pytest.raises(RuntimeError):
        await upsert_faq(ingestion, kb.id, entries)
    assert writes == [2, 2, 1] and len(stack.catalog.list_knowledge(kb.id)) == 4
    writes.clear()
    seen: list[tuple[int, int]] = []
    again = await upsert_faq(ingestion, kb.id, entries, progress=lambda done, total: seen.append((done, total)))
    assert [k.title for k in again] == ["Question 4?"] and writes == [1] and len(stack.catalog.list_knowledge(kb.id)) == 5
    assert seen and seen[-1] == (1, 1)
