"""The run registry: one run per session, stop flags, leases and takeover of orphaned runs."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest

from ragline.service.registry import Decision, MemoryRunRegistry, RedisRunRegistry, RunRecord
from tests.redis_server import fresh_redis


def record(session: str = "s1", message: str = "m1") -> RunRecord:
    return RunRecord(session, "r", "u", message, "t", "o", "{}", "q")


@pytest.fixture(params=["memory", "redis"])
async def registry(request):
    if request.param == "memory":
        yield MemoryRunRegistry()
        return
    async with fresh_redis(request.getfixturevalue("redis_server")) as redis:
        yield RedisRunRegistry(redis)


async def test_a_session_runs_one_turn_at_a_time(registry):
    assert await registry.begin(record("s1", "m1"), "A", 5) is None
    running = await registry.begin(record("s1", "m2"), "A", 5)
    assert running is not None and running.assistant_message_id == "m1"
    assert await registry.begin(record("s2", "m3"), "A", 5) is None
    await registry.finish(record("s1", "m1"))
    assert await registry.running_in("s1") is None
    assert await registry.begin(record("s1", "m2"), "A", 5) is None


async def test_a_stop_flag_is_seen_by_the_holder(registry):
    await registry.begin(record(), "A", 5)
    assert await registry.stop_requested(["m1"]) == set()
    await registry.request_stop(record())
    assert await registry.stop_requested(["m1", "other"]) == {"m1"}
    await registry.finish(record())
    assert await registry.stop_requested(["m1"]) == set()


async def test_messages_injected_into_a_run_are_taken_once_in_order_and_forgotten_when_it_ends(registry):
    await registry.begin(record(), "A", 5)
    assert await registry.take_injected("m1") == []
    await registry.inject("m1", "first")
    await registry.inject("m1", "second")
    assert await registry.take_injected("m1") == ["first", "second"]
    assert await registry.take_injected("m1") == []  # each message is read by the run once
    await registry.inject("m1", "left behind")
    await registry.finish(record())
    assert await registry.take_injected("m1") == []


async def test_only_the_holder_renews_a_lease(redis):
    registry = RedisRunRegistry(redis)
    await registry.begin(record(), "A", 5)
    assert await registry.renew("m1", "A", 5)
    assert not await registry.renew("m1", "B", 5)
    assert not await registry.acquire("m1", "B", 5)


async def test_a_run_whose_lease_expired_is_an_orphan_taken_over_once(redis):
    registry = RedisRunRegistry(redis)
    await registry.begin(record(), "A", 0.1)
    await asyncio.sleep(0.25)
    assert [r.assistant_message_id for r in await registry.orphans()] == ["m1"]
    assert await registry.acquire("m1", "B", 5)
    assert not await registry.acquire("m1", "C", 5)
    assert await registry.orphans() == []
    assert not await registry.renew("m1", "A", 5)  # the old holder learns it lost the run


async def test_a_late_heartbeat_takes_back_an_expired_lease_nobody_took(redis):
    registry = RedisRunRegistry(redis)
    await registry.begin(record(), "A", 0.1)
    await asyncio.sleep(0.25)
    assert await registry.renew("m1", "A", 5)
    assert await registry.orphans() == []


async def test_a_late_heartbeat_never_takes_back_the_lease_of_a_run_that_ended(redis):
    """The replica that took the run over finished it: the stalled one must not start holding it again."""
    registry = RedisRunRegistry(redis)
    await registry.begin(record(), "A", 0.1)
    await asyncio.sleep(0.25)
    assert await registry.acquire("m1", "B", 5)
    await registry.finish(record())
    assert not await registry.renew("m1", "A", 5)
    assert await redis.get("ragline:lease:m1") is None


async def test_an_agent_run_record_keeps_its_graph_and_tools_and_an_older_record_loads_as_a_pipeline_run(redis):
    registry = RedisRunRegistry(redis)
    agent = dataclasses.replace(record(), graph="agent", agent_tools=("search_knowledge", "read_chunks"), approval_tools=("read_chunks",))
    await registry.begin(agent, "A", 5)
    assert await registry.get("m1") == agent  # the graph a takeover resumes, and the tools, as written
    older = {k: v for k, v in dataclasses.asdict(record("s2", "m2")).items() if k not in ("graph", "agent_tools", "approval_tools")}
    await redis.set(registry._k("run", "m2"), json.dumps(older))
    loaded = await registry.get("m2")
    assert loaded is not None and (loaded.graph, loaded.agent_tools, loaded.approval_tools) == ("pipeline", (), ())


async def test_a_waiting_tool_call_is_decided_once_kept_across_a_new_wait_and_forgotten_when_the_run_ends(registry):
    await registry.begin(record(), "A", 5)
    assert not await registry.decide("m1", "c1", Decision(True))  # nothing waits yet
    await registry.await_approval("m1", ["c1", "c2"])
    assert await registry.decisions("m1") == {"c1": None, "c2": None}
    assert await registry.decide("m1", "c1", Decision(False, "no"))
    assert not await registry.decide("m1", "c1", Decision(True))  # the first decision holds
    assert not await registry.decide("m1", "c9", Decision(True))  # a call nobody waits on
    await registry.await_approval("m1", ["c1", "c2"])  # a replica taking the run over waits again: the decision stays
    assert await registry.decisions("m1") == {"c1": Decision(False, "no"), "c2": None}
    await registry.finish(record())
    assert await registry.decisions("m1") == {}
