"""Wiki rebuilds across processes (issue 12): replicas and workers sharing one Redis rebuild a
knowledge base one at a time, through a lock only its owner renews or frees; a rebuild asked for
while another process holds the lock is served (the holder runs once more, or the asker once the
lock is free, also when the holder died); deleting a base deletes its wiki keys, also when one of
its rebuilds was running."""

from __future__ import annotations

import asyncio

from redis import Redis

from ragline.contracts.access import Principal
from ragline.ingestion.wiki import is_wiki_document
from ragline.ingestion.wiki_lock import LOCK_PREFIX, RedisWikiLocks
from ragline.ingestion.wiki_scheduler import WikiScheduler
from ragline.ingestion.wiki_status import RedisWikiStatuses
from ragline.services import Services
from tests.api.test_wiki_api import AURORA_PAGE, BATTERY, PAIRING, PAIRING_PAGE, is_wiki_prompt, wiki_calls
from tests.redis_server import RedisServer
from tests.scripted_model import Reply, ScriptedModel, last_user_text

BOTH = "Aurora sensor battery / Pairing the Aurora sensor"  # the page the two Aurora documents share


def script_slow_pages(model: ScriptedModel, delay: float) -> None:
    """The page of both Aurora documents, or of the pairing one alone; each takes `delay` to write."""
    model.on(lambda b: is_wiki_prompt(b) and "eighteen months" in last_user_text(b), Reply.text(AURORA_PAGE, delay=delay))
    model.on(lambda b: is_wiki_prompt(b) and "SYNC" in last_user_text(b), Reply.text(PAIRING_PAGE, delay=delay))


async def page_requested(model: ScriptedModel, count: int = 1) -> None:
    """Wait until the model was asked for `count` pages: a rebuild is then inside its model call."""
    for _ in range(400):
        if wiki_calls(model) >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the model was asked for {wiki_calls(model)} wiki pages, not {count}")


def wiki_pages(services: Services, kb_id: str) -> list[tuple[str, list[str], str]]:
    """(title, source document ids, text) of each page stored."""
    catalog = services.retrieval.catalog
    return [(d.title, sorted(d.metadata["sources"]), catalog.chunks_of(d.id)[0].content)
            for d in catalog.list_knowledge(kb_id) if is_wiki_document(d)]


async def pairing_ingested(replica, model: ScriptedModel, kb_name: str, delay: float):
    """A wiki-enabled base on `replica` with the pairing document in it; each page takes `delay` to write."""
    kb = replica.retrieval.knowledge_bases.create(kb_name, wiki_enabled=True)
    script_slow_pages(model, delay=delay)
    return kb, await replica.ingestion.ingest_text(kb.id, PAIRING[1], title=PAIRING[0])


def wiki_keys(redis_server: RedisServer, kb_id: str) -> list[bytes]:
    return Redis.from_url(redis_server.url).keys(f"ragline:wiki:*{kb_id}")


async def test_overlapping_rebuilds_on_two_replicas_run_one_at_a_time_and_the_last_documents_get_their_page(
        wiki_replicas, scripted_model: ScriptedModel):
    a, b = wiki_replicas("a"), wiki_replicas("b")
    kb, pairing = await pairing_ingested(a, scripted_model, "shared-wiki-lock", delay=1.5)
    await page_requested(scripted_model)  # A's rebuild is writing the pairing page
    battery = await b.ingestion.ingest_text(kb.id, BATTERY[1], title=BATTERY[0])  # B is asked while A holds the lock

    assert b.wiki.status(kb.id).state == "building"
    await asyncio.gather(a.wiki.drain(), b.wiki.drain())
    # one rebuild after the other: the second read the first one's page and replaced it; run at
    # once, both would have planned from no page, and the pairing page would be left beside the shared one
    [(title, sources, text)] = wiki_pages(b, kb.id)
    assert title == BOTH and sources == sorted([pairing.id, battery.id]) and text.startswith(AURORA_PAGE)
    assert wiki_calls(scripted_model) == 2
    done = b.wiki.status(kb.id)
    assert done.state == "ok" and done.written == [BOTH] and done.removed == 1 and done == a.wiki.status(kb.id)


async def test_a_request_beside_a_dead_holders_lock_is_served_once_the_lock_expires(
        wiki_replicas, redis_server: RedisServer, scripted_model: ScriptedModel):
    a = wiki_replicas("a")
    kb = a.retrieval.knowledge_bases.create("orphaned-wiki-lock", wiki_enabled=True)
    script_slow_pages(scripted_model, delay=0)
    dead = RedisWikiLocks(Redis.from_url(redis_server.url), ttl_s=1)
    assert dead.acquire(kb.id) is not None  # a worker took the lock and died: never renewed, never released
    await a.ingestion.ingest_text(kb.id, PAIRING[1], title=PAIRING[0])

    await asyncio.wait_for(a.wiki.drain(), timeout=60)  # A waits for the dead lock to expire, then rebuilds itself (a guard, not a measure)
    assert [title for title, _, _ in wiki_pages(a, kb.id)] == [PAIRING[0]]
    assert a.wiki.status(kb.id).state == "ok"


async def test_only_the_owner_renews_finishes_or_frees_the_lock_and_a_lost_lock_is_noticed(redis_server: RedisServer):
    redis_server.flush()
    client = Redis.from_url(redis_server.url)
    first, second = RedisWikiLocks(client, ttl_s=1), RedisWikiLocks(client, ttl_s=1)
    assert first.request("kb") == 1 and second.request("kb") == 2
    mine = first.acquire("kb")
    assert mine is not None and second.acquire("kb") is None
    second.release("kb", "not-the-owner")
    assert not second.finish("kb", "not-the-owner", 2) and second.acquire("kb") is None
    assert first.finish("kb", mine, 1) and first.progress("kb") == (2, 1)

    await asyncio.sleep(1.5)  # past the TTL, unrenewed (the holder paused): another process takes over
    theirs = second.acquire("kb")
    assert theirs is not None
    await asyncio.wait_for(first.hold("kb", mine), timeout=10)  # the old holder's renewal finds the lock lost
    assert not first.finish("kb", mine, 2) and first.progress("kb") == (2, 1)
    first.release("kb", mine)
    assert first.acquire("kb") is None  # the old holder did not free the new one's lock
    assert second.finish("kb", theirs, 2) and second.progress("kb") == (2, 2)
    second.release("kb", theirs)
    assert first.acquire("kb") is not None


async def test_a_holder_that_loses_its_lock_abandons_its_rebuild_and_the_new_holder_writes_the_page(
        wiki_replicas, redis_server: RedisServer, scripted_model: ScriptedModel):
    a = wiki_replicas("a")
    kb = a.retrieval.knowledge_bases.create("stolen-wiki-lock")
    client = Redis.from_url(redis_server.url)
    scheduler = WikiScheduler(lambda: a.wiki.builder, lambda: a.retrieval.catalog, RedisWikiStatuses(client, ttl_s=1))
    scripted_model.on(is_wiki_prompt, Reply.text(PAIRING_PAGE, delay=30), times=1)  # the first page call never returns in time
    script_slow_pages(scripted_model, delay=0)
    await a.ingestion.ingest_text(kb.id, PAIRING[1], title=PAIRING[0])
    a.retrieval.knowledge_bases.update(kb.id, Principal.operator_of("default"), wiki_enabled=True)  # not A's scheduler: this one, whose lock lives 1 s
    await scheduler.schedule(kb.id)
    await page_requested(scripted_model)
    client.set(f"{LOCK_PREFIX}{kb.id}", "another-process", ex=2)  # as if the lock expired and another process took it

    await asyncio.wait_for(scheduler.drain(), timeout=60)  # a guard, not a measure
    [(title, _, text)] = wiki_pages(a, kb.id)
    assert title == PAIRING[0] and text.startswith(PAIRING_PAGE)
    assert scheduler.status(kb.id).written == [PAIRING[0]]  # written once the lock was free again, not by the holder that lost it
    await scheduler.aclose()


async def test_deleting_a_knowledge_base_on_another_replica_deletes_its_wiki_keys(
        wiki_replicas, redis_server: RedisServer, scripted_model: ScriptedModel):
    a, b = wiki_replicas("a"), wiki_replicas("b")
    kb, _ = await pairing_ingested(a, scripted_model, "deleted-wiki", delay=0)
    await a.wiki.drain()
    assert wiki_keys(redis_server, kb.id)  # the last report and the request count

    await b.retrieval.knowledge_bases.delete(kb.id, Principal.operator_of("default"))  # B never rebuilt nor read this wiki
    assert wiki_keys(redis_server, kb.id) == []


async def test_a_rebuild_running_while_its_base_is_deleted_leaves_no_wiki_keys(
        wiki_replicas, redis_server: RedisServer, scripted_model: ScriptedModel):
    a, b = wiki_replicas("a"), wiki_replicas("b")
    kb, _ = await pairing_ingested(a, scripted_model, "deleted-mid-rebuild", delay=1.5)
    await page_requested(scripted_model)
    assert {key.decode().rsplit(":", 2)[1] for key in wiki_keys(redis_server, kb.id)} == {"building", "requests", "lock"}

    await b.retrieval.knowledge_bases.delete(kb.id, Principal.operator_of("default"))
    await a.wiki.drain()  # A's page comes back after the delete: its report is not recorded
    assert wiki_keys(redis_server, kb.id) == []
