"""TurnDriver: what a turn's stages wrote, gathered from LangGraph's updates stream (TurnWrites)."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage

from ragline.checkpoints.savers import memory_saver
from ragline.citations.messages import message_text
from ragline.contracts.context import RunContext, RunHost
from ragline.contracts.request import PipelineRequest
from ragline.graph.graphs import build_graph
from ragline.graph.turn import TurnDriver, TurnWrites
from ragline.service import threads
from ragline.services import Services
from tests.scripted_model import Reply


async def test_what_the_stages_wrote_is_what_the_thread_holds_after_the_turn(scripted_model):
    scripted_model.on(lambda b: True, Reply.text("An answer of a few words."))
    graph = build_graph("ragline", checkpointer=memory_saver())
    for n in (1, 2):  # the second turn: the thread already holds the first
        driver = TurnDriver(graph, RunContext(session_id="s", assistant_message_id=f"a{n}", host=RunHost(services=Services())), durability="sync")
        async for _ in driver.event_dicts({"request": PipelineRequest(query=f"question {n}", rewrite_enabled=False)}):
            pass
        thread = (await threads.snapshot(graph, "s")).values
        written = driver.written.values()
        assert [m.id for m in written["messages"]] == [driver.turn.user_message_id, f"a{n}"]  # this turn's, not the history
        saved = {m.id: m for m in thread["messages"]}
        assert all(saved[m.id] == m for m in written["messages"])
        assert message_text(saved[f"a{n}"]) == "An answer of a few words."
        assert written["chat_response"] == thread["chat_response"] and thread["chat_response"] is not None


def test_updates_of_every_shape_keep_the_last_write_of_each_message_and_of_chat_response():
    writes = TurnWrites()
    writes.see({"begin_turn": {"messages": [HumanMessage("q", id="u")], "chat_response": None}})
    writes.see({"a_node_that_returned_nothing": None, "fan_out": [{"messages": AIMessage("draft", id="a")}, {"other": 1}]})
    writes.see({"answer": {"messages": [AIMessage("final", id="a")], "chat_response": "response"}})
    assert [(m.id, m.content) for m in writes.values()["messages"]] == [("u", "q"), ("a", "final")]
    assert writes.values()["chat_response"] == "response"
    writes.see({"edit": {"messages": [RemoveMessage(id="u")]}})
    assert [m.id for m in writes.values()["messages"]] == ["a"]


def test_the_documents_a_turn_drew_on_are_gathered_from_every_shape_of_passage_write():
    """Merged results (models, or dicts from a checkpoint), agent sources, and the agent's reset of
    its sources (an Overwrite) all pass; none stops the turn."""
    from langgraph.types import Overwrite

    from tests.nodes.results import hit

    writes = TurnWrites()
    writes.see({"begin": {"sources": Overwrite([])}, "merge": {"merge_results": [hit("c1", knowledge_id="d1")]}})
    writes.see({"agent": {"sources": [{"chunk_id": "c2", "knowledge_id": "d2"}, {"chunk_id": "web", "knowledge_id": ""}]}})
    writes.see({"again": {"sources": Overwrite([{"chunk_id": "c3", "knowledge_id": "d3"}]), "merge_results": None}})
    assert writes.values()["drawn_on"] == ["d1", "d2", "d3"]
