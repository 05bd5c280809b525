"""The citation ledger (memory/citations.py): one item per answer, per caller, across sessions."""

from __future__ import annotations

from langgraph.store.memory import InMemoryStore

from ragline.memory.citations import CitationLedger, cited_documents, count_citations


def test_cited_documents_are_read_from_the_kb_tags_of_an_answer():
    text = 'a <kb chunk_id="c1" knowledge_id="d1"/> b <kb chunk_id="c2" knowledge_id="d2"/> <kb knowledge_id="d1"/>'
    assert cited_documents(text) == {"d1", "d2"} and cited_documents("no citations") == set()


async def test_answers_are_recorded_once_per_message_and_kept_per_caller():
    ledger = CitationLedger(InMemoryStore())
    await ledger.record("acme", "ann", "m1", ["d1", "d2"])
    await ledger.record("acme", "ann", "m1", ["d1", "d2"])  # a resumed run writes the same answer again
    await ledger.record("acme", "ann", "m2", ["d1"])
    await ledger.record("acme", "bob", "m3", ["d1"])
    await ledger.record("globex", "ann", "m4", ["d1"])
    await ledger.record("acme", "ann", "m5", [])  # nothing cited: nothing kept
    answers = await ledger.answers("acme", "ann")
    assert sorted(answers) == ["m1", "m2"]
    assert count_citations(answers) == {"d1": 2, "d2": 1}


async def test_a_user_id_that_looks_like_a_namespace_prefix_sees_only_itself():
    ledger = CitationLedger(InMemoryStore())
    await ledger.record("acme", "ann", "m1", ["d1"])
    await ledger.record("acme", "an", "m2", ["d2"])
    assert list(await ledger.answers("acme", "an")) == ["m2"]
