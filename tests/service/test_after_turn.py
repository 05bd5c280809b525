"""After a turn (service/after_turn.py): the answer's citations go into the caller's ledger, so
memory affinity sees them from every other session; stopped or failed turns leave nothing."""

from __future__ import annotations

import asyncio

from langgraph.store.memory import InMemoryStore

from ragline.checkpoints.savers import memory_saver
from ragline.contracts.request import PipelineRequest
from ragline.contracts.state import TurnIds
from ragline.graph.graphs import build_graph
from ragline.memory.citations import CitationLedger
from ragline.service import threads
from ragline.service.after_turn import AfterTurn, wants_index
from ragline.service.registry import RunRecord
from ragline.service.replay import Transcript
from ragline.services import Services
from ragline.settings import Settings

ANSWER = 'Two years <kb chunk_id="c1" knowledge_id="warranty-doc"/>.'


def _record(message_id: str) -> RunRecord:
    return RunRecord("s1", "r1", "u1", message_id, "acme", "ann", "{}", "How long is the warranty?")


async def _after(shown: Transcript) -> dict[str, list[str]]:
    graph = build_graph("ragline", checkpointer=memory_saver())
    await threads.save_answer(graph, TurnIds("s1", "r1", "u1", "a1"),
                              query="q", content=ANSWER, references=[], stopped=False)
    store = InMemoryStore()
    after = AfterTurn(Services(Settings(), memory_store_factory=lambda: store), Settings())
    values = (await threads.snapshot(graph, "s1")).values
    await asyncio.gather(*after.jobs(values, _record("a1"), PipelineRequest(query="q"), shown))
    return await CitationLedger(store).answers("acme", "ann")


async def test_an_answered_turn_records_its_cited_documents_for_the_caller():
    assert await _after(Transcript(answer=ANSWER)) == {"a1": ["warranty-doc"]}


async def test_a_stopped_or_failed_turn_records_nothing():
    assert await _after(Transcript(answer=ANSWER, stopped=True)) == {}
    assert await _after(Transcript(answer=ANSWER, failed=True)) == {}


def test_the_request_decides_indexing_and_unset_follows_the_server():
    assert wants_index(None, False) is False and wants_index(None, True) is True
    assert wants_index(True, False) is True and wants_index(False, True) is False
