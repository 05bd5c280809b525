from ragline.ingestion.sample import ensure_sample_kb, sample_files
from ragline.ingestion.service import IngestionService
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


async def test_sample_kb_from_another_checkout_replaces_its_documents_instead_of_copying_them(stack):
    """Two checkouts (or venvs) share one data directory: the sample must stay one copy per file."""
    kb = await ensure_sample_kb(stack)
    other_checkout = [sample_files()[0]]
    await IngestionService(stack).ingest_files(kb.id, other_checkout)  # keyed by this absolute path
    assert len(stack.catalog.list_knowledge(kb.id)) == len(sample_files()) + 1
    await ensure_sample_kb(stack)
    documents = stack.catalog.list_knowledge(kb.id)
    assert sorted(d.title for d in documents) == sorted(p.stem for p in sample_files())
    hits = await stack.searcher.search(SearchParams(query="How long is the warranty?", knowledge_base_ids=[kb.id]))
    assert len({hit.content for hit in hits}) == len(hits)  # no duplicated passages
