"""Wiki status in a shared deployment (issue 12): a rebuild runs where the documents were ingested
(a worker), while any replica answers `GET .../wiki`. With Redis the status lives there, so
replica B sees replica A's rebuild as building while it runs and then its report; a process that
died mid-rebuild stops showing "building" once its mark expires."""

from __future__ import annotations

import asyncio

from redis import Redis

from ragline.ingestion.wiki_status import RedisWikiStatuses, WikiStatus
from tests.api.test_wiki_api import AURORA_PAGE, PAIRING, is_wiki_prompt
from tests.redis_server import RedisServer
from tests.scripted_model import Reply, ScriptedModel


async def test_a_rebuild_on_one_replica_is_building_then_reported_on_another(wiki_replicas, scripted_model: ScriptedModel):
    a, b = wiki_replicas("a"), wiki_replicas("b")
    kb = a.retrieval.knowledge_bases.create("shared-wiki", wiki_enabled=True)
    assert b.wiki.status(kb.id).state == "idle"
    scripted_model.on(is_wiki_prompt, Reply.text(AURORA_PAGE, delay=1.0))  # the page is still being written when B looks
    await a.ingestion.ingest_text(kb.id, PAIRING[1], title=PAIRING[0])

    running = b.wiki.status(kb.id)
    assert running.state == "building" and running.enabled and running.pages == 0
    await a.wiki.drain()
    done = b.wiki.status(kb.id)
    assert done.state == "ok" and done.pages == 1 and len(done.written) == 1 and done.finished_at is not None
    assert done == a.wiki.status(kb.id)


async def test_a_dead_rebuilders_mark_expires_also_beside_a_live_one(redis_server: RedisServer):
    redis_server.flush()
    client = Redis.from_url(redis_server.url)
    dying, living = RedisWikiStatuses(client, ttl_s=1), RedisWikiStatuses(client)
    dying.start("kb1")  # and never renewed nor stopped: its process died
    alone = dying.start("kb2")
    live = living.start("kb1")  # a second worker rebuilding the same base keeps the key alive
    assert dying.building("kb1") and dying.building("kb2")
    await asyncio.sleep(2.1)  # past the dying marks' deadlines, in Redis server seconds
    assert not dying.building("kb2") and living.building("kb1")
    living.stop("kb1", live)
    assert not living.building("kb1")  # the dead mark left in the set does not count
    dying.stop("kb2", alone)


def test_a_report_round_trips_through_redis_and_a_stopped_rebuild_is_not_building(redis_server: RedisServer):
    redis_server.flush()
    statuses = RedisWikiStatuses(Redis.from_url(redis_server.url))
    report = WikiStatus(knowledge_base_id="kb1", enabled=True, state="failed", failed={"Aurora": "timeout"}, error="")
    statuses.record(report)
    assert statuses.last("kb1") == report and statuses.last("kb2") is None
    first, second = statuses.start("kb1"), statuses.start("kb1")  # two workers on one base
    statuses.stop("kb1", first)
    assert statuses.building("kb1")
    statuses.stop("kb1", second)
    assert not statuses.building("kb1")
