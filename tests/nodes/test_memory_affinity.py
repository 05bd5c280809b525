"""memory_affinity across sessions: the caller's citation ledger counts, not only this thread."""

from __future__ import annotations

from langchain_core.messages import AIMessage
from langgraph.store.memory import InMemoryStore

from ragline.memory.citations import CitationLedger
from ragline.nodes.memory_affinity import memory_affinity
from ragline.services import Services
from tests.nodes.helpers import node_runtime
from tests.nodes.results import hit

NEAR_TIE = [hit("a", score=0.80, knowledge_id="new"), hit("b", score=0.79, knowledge_id="cited")]


async def _run(store: InMemoryStore, messages=(), tenant: str = "acme", user: str = "ann") -> list[str]:
    services = Services(memory_store_factory=lambda: store)
    runtime = node_runtime(services, tenant_id=tenant, user_id=user)
    update = await memory_affinity({"rerank_results": NEAR_TIE, "messages": list(messages)}, runtime)
    return [r.id for r in update.get("rerank_results", NEAR_TIE)]


async def test_citations_in_the_callers_other_sessions_break_a_near_tie():
    store = InMemoryStore()
    ledger = CitationLedger(store)
    await ledger.record("acme", "ann", "other-session-answer-1", ["cited"])
    await ledger.record("acme", "ann", "other-session-answer-2", ["cited"])
    assert await _run(store) == ["b", "a"]


async def test_another_users_or_tenants_citations_never_count():
    store = InMemoryStore()
    ledger = CitationLedger(store)
    for n in range(5):
        await ledger.record("acme", "bob", f"bob-{n}", ["cited"])
        await ledger.record("globex", "ann", f"globex-{n}", ["cited"])
    assert await _run(store) == ["a", "b"]


async def test_an_answer_in_the_ledger_and_the_thread_counts_once():
    store = InMemoryStore()
    await CitationLedger(store).record("acme", "ann", "m1", ["cited"])
    same = AIMessage('x <kb chunk_id="c" knowledge_id="cited"/>', id="m1")
    assert await _run(store, [same]) == ["a", "b"]  # one answer citing it: below the two needed
    other = AIMessage('y <kb chunk_id="c" knowledge_id="cited"/>', id="m2")
    assert await _run(store, [same, other]) == ["b", "a"]
