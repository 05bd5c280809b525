"""Which calls wait for approval (nodes/agent/approval.py), and how a resume value decides them."""

from __future__ import annotations

from ragline.nodes.agent.approval import NO_DECISION, decisions_from, needs_approval


def test_a_tool_needs_approval_by_its_name_or_an_mcp_tool_by_its_servers():
    marked = ("search_knowledge", "orders", "billing__refund")
    assert needs_approval("search_knowledge", marked) and needs_approval("orders__cancel_order", marked)
    assert needs_approval("billing__refund", marked) and not needs_approval("billing__lookup", marked)
    assert not needs_approval("read_chunks", marked) and not needs_approval("orders", ())


def test_a_resume_value_decides_each_waiting_call_and_denies_what_it_leaves_out():
    assert decisions_from(True, ["a", "b"]) == {"a": (True, ""), "b": (True, "")}
    assert decisions_from({"approved": False, "reason": "no"}, ["a"]) == {"a": (False, "no")}
    assert decisions_from({"a": True, "b": {"approved": False, "reason": "x"}}, ["a", "b", "c"]) == {
        "a": (True, ""), "b": (False, "x"), "c": (False, NO_DECISION)}
    assert decisions_from("yes", ["a"]) == {"a": (False, NO_DECISION)}
