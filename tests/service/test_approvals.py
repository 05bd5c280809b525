"""Waiting for tool-call decisions (service/approvals.py): every call decided resumes at once with
each decision, an undecided call is denied at the timeout, and a stop ends the wait with nothing."""

from __future__ import annotations

import asyncio

from ragline.service.approvals import await_decisions, waiting_calls
from ragline.service.registry import Decision, MemoryRunRegistry

PAUSED = [{"tool_approval_required": [{"tool_call_id": "a", "tool_name": "search_knowledge", "arguments": {}},
                                      {"tool_call_id": "b", "tool_name": "read_chunks", "arguments": {}}]}]


def test_the_waiting_calls_are_read_from_the_graphs_interrupts():
    assert waiting_calls(PAUSED) == ["a", "b"] and waiting_calls([]) == [] and waiting_calls(["not a pause"]) == []


async def test_the_wait_ends_when_every_call_is_decided_with_each_decision():
    registry = MemoryRunRegistry()
    waiting = asyncio.create_task(await_decisions(registry, "m", ["a", "b"], timeout_s=30, poll_s=0.01, stopped=lambda: False))
    await asyncio.sleep(0.05)
    assert await registry.decide("m", "a", Decision(True, ""))
    await asyncio.sleep(0.05)
    assert not waiting.done()  # b is still undecided
    assert await registry.decide("m", "b", Decision(False, "not that document"))
    assert await asyncio.wait_for(waiting, 5) == {"a": {"approved": True, "reason": ""}, "b": {"approved": False, "reason": "not that document"}}


async def test_a_call_undecided_at_the_timeout_is_denied_and_a_stop_ends_the_wait():
    registry = MemoryRunRegistry()
    await registry.await_approval("m", ["a"])
    await registry.decide("m", "a", Decision(True, ""))
    late = await await_decisions(registry, "m", ["a", "b"], timeout_s=0.05, poll_s=0.01, stopped=lambda: False)
    assert late == {"a": {"approved": True, "reason": ""}, "b": {"approved": False, "reason": "no decision within 0.05 s"}}
    assert await await_decisions(registry, "n", ["c"], timeout_s=30, poll_s=0.01, stopped=lambda: True) is None
