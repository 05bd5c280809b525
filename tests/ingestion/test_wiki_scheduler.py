"""The wiki scheduler in shared mode makes its Redis calls (status marks, reports, the lock and the
request count: a sync client) in worker threads, never on the event loop, where each would stall
every stream of the process (ingestion/wiki_scheduler.py `_call`)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from redis import Redis

from ragline.contracts.access import Principal
from tests.api.test_wiki_api import PAIRING, script_pages
from tests.scripted_model import ScriptedModel

WIKI_KEYS = "ragline:wiki:"


def on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def record_wiki_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """(command, made on an event loop's thread) of every Redis command on a wiki key, by any client."""
    calls: list[tuple[str, bool]] = []
    execute = Redis.execute_command

    def recorded(self: Redis, *args: Any, **options: Any) -> Any:
        names = (a.decode(errors="replace") if isinstance(a, bytes) else a for a in args[1:])
        if any(isinstance(name, str) and name.startswith(WIKI_KEYS) for name in names):
            calls.append((str(args[0]).upper(), on_event_loop()))
        return execute(self, *args, **options)

    monkeypatch.setattr(Redis, "execute_command", recorded)
    return calls


async def test_no_wiki_status_or_lock_call_blocks_the_event_loop(wiki_replicas, scripted_model: ScriptedModel, monkeypatch: pytest.MonkeyPatch):
    a, b = wiki_replicas("a"), wiki_replicas("b")
    kb = a.retrieval.knowledge_bases.create("off-the-loop", wiki_enabled=True)
    script_pages(scripted_model)
    calls = record_wiki_calls(monkeypatch)

    await a.ingestion.ingest_text(kb.id, PAIRING[1], title=PAIRING[0])  # schedule: the request, the building mark
    await a.wiki.drain()  # the lock, the fence, the finish, the report, the release
    assert (await b.wiki.rebuild(kb.id)).state == "ok"  # another replica: its schedule, rebuild and status read
    await b.retrieval.knowledge_bases.delete(kb.id, Principal.operator_of("default"))  # forget: the base's wiki keys go

    assert {"HINCRBY", "EVALSHA", "GET", "SET", "DEL"} <= {command for command, _ in calls}
    assert [command for command, on_loop in calls if on_loop] == []
