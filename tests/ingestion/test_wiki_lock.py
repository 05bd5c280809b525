"""Page writes are fenced by the wiki lock (ingestion/wiki_lock.py): a rebuild whose lock was taken
over notices only at its next renewal, and until then it writes and removes no page; the process
holding the lock then (here: this one again, once the lock is free) writes them."""

from __future__ import annotations

import asyncio
import logging

import pytest
from redis import Redis

from ragline.contracts.access import Principal
from ragline.ingestion.wiki import is_wiki_document
from ragline.ingestion.wiki_lock import LOCK_PREFIX, RedisWikiLocks
from ragline.ingestion.wiki_scheduler import WikiScheduler
from ragline.ingestion.wiki_status import RedisWikiStatuses
from ragline.services import Services
from tests.api.test_wiki_api import AURORA_PAGE, BATTERY, BREAD, PAIRING, is_wiki_prompt, script_pages, wiki_calls
from tests.ingestion.test_shared_wiki_rebuilds import BOTH, page_requested
from tests.redis_server import RedisServer
from tests.scripted_model import Reply, ScriptedModel, last_user_text


def page_titles(services: Services, kb_id: str) -> set[str]:
    return {d.title for d in services.retrieval.catalog.list_knowledge(kb_id) if is_wiki_document(d)}


async def logged(caplog: pytest.LogCaptureFixture, words: str) -> None:
    for _ in range(200):  # 20 s, a guard: the page call takes 1.5 s
        if any(words in record.getMessage() for record in caplog.records):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"nothing logged {words!r}")


def test_only_the_owners_token_holds_the_lock(redis_server: RedisServer):
    redis_server.flush()
    locks = RedisWikiLocks(Redis.from_url(redis_server.url))
    mine = locks.acquire("kb")
    assert mine is not None and locks.held("kb", mine) and not locks.held("kb", "another-process")
    locks.client.set(f"{LOCK_PREFIX}kb", "another-process")  # expired, and taken over
    assert not locks.held("kb", mine)
    locks.forget("kb")  # the base was deleted
    assert not locks.held("kb", mine)


async def test_a_rebuild_that_lost_its_lock_writes_and_removes_no_page_before_it_notices(
        wiki_replicas, redis_server: RedisServer, scripted_model: ScriptedModel, caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.WARNING, logger="ragline.ingestion.wiki_scheduler")
    a = wiki_replicas("a")
    kb = a.retrieval.knowledge_bases.create("fenced-wiki", wiki_enabled=True)
    # the first page of both Aurora documents is slow: the lock is taken while it is written
    scripted_model.on(lambda b: is_wiki_prompt(b) and "eighteen months" in last_user_text(b), Reply.text(AURORA_PAGE, delay=1.5), times=1)
    script_pages(scripted_model)
    await a.ingestion.ingest_text(kb.id, PAIRING[1], title=PAIRING[0])
    bread = await a.ingestion.ingest_text(kb.id, BREAD[1], title=BREAD[0])
    await a.wiki.drain()
    assert page_titles(a, kb.id) == {PAIRING[0], BREAD[0]}
    a.retrieval.knowledge_bases.update(kb.id, Principal.operator_of("default"), wiki_enabled=False)  # the next changes start no rebuild on A's scheduler
    await a.ingestion.ingest_text(kb.id, BATTERY[1], title=BATTERY[0])  # now one page for both Aurora documents ...
    await a.ingestion.delete_knowledge(kb.id, bread.id)  # ... and none for the bread
    a.retrieval.knowledge_bases.update(kb.id, Principal.operator_of("default"), wiki_enabled=True)

    client = Redis.from_url(redis_server.url)
    # renewed every 20 s: within this test only the fence can tell the rebuild its lock is gone
    scheduler = WikiScheduler(lambda: a.wiki.builder, lambda: a.retrieval.catalog, RedisWikiStatuses(client, ttl_s=60))
    await scheduler.schedule(kb.id)
    await page_requested(scripted_model, wiki_calls(scripted_model) + 1)
    client.set(f"{LOCK_PREFIX}{kb.id}", "another-process", ex=60)  # as if the lock expired and another process took it
    await logged(caplog, "lost its lock")
    assert page_titles(a, kb.id) == {PAIRING[0], BREAD[0]}  # the shared page not written, the bread page not removed

    client.delete(f"{LOCK_PREFIX}{kb.id}")  # the other process is done: this one takes the lock and rebuilds
    await asyncio.wait_for(scheduler.drain(), timeout=60)  # a guard, not a measure
    assert page_titles(a, kb.id) == {BOTH}
    assert scheduler.status(kb.id).written == [BOTH]
    await scheduler.aclose()
