"""Wiki pages without a server: topics, bounded input, slugs, and one rebuild per base at a time."""

from __future__ import annotations

import asyncio
from typing import Any

from ragline.citations.resources import ResourceTable
from ragline.ingestion.wiki import WikiReport, cluster_by_topic, cut_to_tokens, knowledge_id_of_slug, wiki_slug
from ragline.ingestion.wiki_scheduler import WikiScheduler
from ragline.retrieval.types import Knowledge, KnowledgeBase


def test_documents_about_one_topic_share_a_page_and_others_get_their_own():
    vectors = [[1.0, 0.0], [0.0, 1.0], [0.99, 0.05], [0.98, 0.1]]
    assert cluster_by_topic(vectors, threshold=0.9, max_size=4) == [[0, 2, 3], [1]]


def test_a_topic_page_takes_at_most_max_documents():
    assert cluster_by_topic([[1.0, 0.0]] * 3, threshold=0.9, max_size=2) == [[0, 1], [2]]


def test_page_input_is_cut_to_its_token_share():
    assert cut_to_tokens("a" * 100, tokens=50, budget=10) == "a" * 20 + " …"
    assert cut_to_tokens("short", tokens=2, budget=10) == "short"


def test_a_page_slug_is_the_seeds_summary_uuid_and_reaches_the_model_as_a_res_alias():
    knowledge_id = "5d1c2b3aaaaa4bbb8cccdddd00001111"
    slug = wiki_slug(knowledge_id)
    assert slug == "summary/5d1c2b3a-aaaa-4bbb-8ccc-dddd00001111" and knowledge_id_of_slug(slug) == knowledge_id
    table = ResourceTable()
    assert table.encode_text(f"Wiki page: [[{slug}|Aurora]]") == "Wiki page: [[res://0001|Aurora]]"
    assert table.restore("res://0001") == slug


class SlowBuilder:
    """Counts rebuilds and how many ran at once; each waits for the test to let it finish."""

    def __init__(self) -> None:
        self.calls = 0
        self.running = 0
        self.most_at_once = 0
        self.release = asyncio.Event()

    async def rebuild(self, kb_id: str, limit: Any = None, fence: Any = None) -> WikiReport:
        self.calls += 1
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        await self.release.wait()
        self.running -= 1
        return WikiReport(kb_id, written=[f"page {self.calls}"])


class NoCatalog:
    def get_kb(self, kb_id: str) -> None:
        return None

    def list_knowledge(self, kb_id: str) -> list[Knowledge]:
        return []


def kb(wiki: bool) -> KnowledgeBase:
    return KnowledgeBase(id="kb", tenant_id="t", name="kb", embedding_model="e", wiki_enabled=wiki)


def document(file_type: str = "txt", source: str = "a.txt") -> Knowledge:
    return Knowledge(id="d", knowledge_base_id="kb", tenant_id="t", title="d", file_type=file_type, source=source)


async def test_changes_during_a_rebuild_run_it_once_more_never_twice_at_once():
    builder = SlowBuilder()
    scheduler = WikiScheduler(lambda: builder, NoCatalog)  # type: ignore[arg-type, return-value]
    for _ in range(3):
        await scheduler.documents_changed(kb(True), [document()])
        await asyncio.sleep(0)
    assert builder.calls == 1 and scheduler.status("kb").state == "building"
    builder.release.set()
    await scheduler.drain()
    assert builder.calls == 2 and builder.most_at_once == 1
    assert scheduler.status("kb").state == "ok" and scheduler.status("kb").written == ["page 2"]


async def test_no_rebuild_for_a_base_without_the_wiki_or_for_the_wikis_own_pages():
    builder = SlowBuilder()
    scheduler = WikiScheduler(lambda: builder, NoCatalog)  # type: ignore[arg-type, return-value]
    await scheduler.documents_changed(kb(False), [document()])
    await scheduler.documents_changed(kb(True), [document("wiki", "wiki:abc")])
    await scheduler.drain()
    assert builder.calls == 0 and scheduler.status("kb").state == "idle"
