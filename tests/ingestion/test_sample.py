from ragline.ingestion.sample import ensure_sample_kb, sample_files
from ragline.retrieval.types import SearchParams


def test_sample_kb_has_english_and_chinese_documents():
    names = [p.name for p in sample_files()]
    assert len(names) >= 5 and "zh_guide.md" in names


async def test_ensure_sample_kb_is_idempotent_and_answers_in_both_languages(stack):
    kb = await ensure_sample_kb(stack)
    revision = stack.catalog.kb_revision(kb.id)
    again = await ensure_sample_kb(stack)
    assert again.id == kb.id and stack.catalog.kb_revision(kb.id) == revision
    english = await stack.searcher.search(SearchParams(query="How long is the warranty?", knowledge_base_ids=[kb.id]))
    assert any("two-year warranty" in r.content for r in english[:3])
    chinese = await stack.searcher.search(SearchParams(query="传感器应该安装多高", knowledge_base_ids=[kb.id]))
    assert "一点五米" in chinese[0].content
