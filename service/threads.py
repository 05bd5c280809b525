"""A session's conversation as a LangGraph thread: read it, edit it, travel in its history.

Edits go through `update_state`, so every change is a new checkpoint and the earlier ones stay in
the history (fork and rewind read it). LangGraph writes an update through a node, and no stage of
the pipeline made the edit, so edits are written by the one node of a graph of their own,
`edit_messages`, on the pipeline's checkpointer and thread (as agent mode's graph shares it): the
thread's history says an edit made the change, and the node's only edge goes to END, so the thread
stays at rest after it. A thread left with pending tasks (a run cancelled hard mid-node) is
settled first: its pending tasks cleared.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AnyMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot

from ragline.citations.messages import message_text
from ragline.contracts import thread_messages
from ragline.contracts.context import RunContext
from ragline.contracts.state import PipelineState, TurnIds
from ragline.graph.graphs import Graph

EDIT = "edit_messages"  # the editor graph's node: what a thread's history names as an edit's writer
Editor = CompiledStateGraph[PipelineState, RunContext, PipelineState, PipelineState]


def thread_config(session_id: str, checkpoint_id: str | None = None) -> RunnableConfig:
    configurable = {"thread_id": session_id}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}





def _checkpoint_id(state: StateSnapshot) -> str:
    return str(state.config.get("configurable", {}).get("checkpoint_id") or "")


async def snapshot(graph: Graph, session_id: str) -> StateSnapshot:
    """The thread's newest checkpoint, with its checkpoint id in `.config`.

    The Redis saver keeps a "latest" pointer beside the checkpoints; a process killed between
    writing a checkpoint and moving the pointer leaves it one step behind, and resuming from it
    would see no pending task and end the turn silently. Checkpoint ids are time-ordered, so the
    newest in the history wins over the pointer. A thread at rest (the newest checkpoint has no
    next task, as after every finished turn) is read once, from the history; only one left mid-turn
    is read from the pointer too, whose pending writes LangGraph applies to the state it shows.
    """
    newest = None
    async for newest in graph.aget_state_history(thread_config(session_id), limit=1):
        if not newest.next:  # at rest (every turn ends so): no task whose writes the head could add
            return newest
    current = await graph.aget_state(thread_config(session_id))
    if newest is not None and _checkpoint_id(newest) > _checkpoint_id(current):
        return newest
    return current


async def messages_of(graph: Graph, session_id: str) -> list[AnyMessage]:
    return list((await snapshot(graph, session_id)).values.get("messages", []))


async def settle(graph: Graph, session_id: str) -> None:
    """Clear the pending tasks a hard-cancelled or crashed run left on the thread."""
    state = await snapshot(graph, session_id)
    if state.next:
        await graph.aupdate_state(state.config, None, as_node=END)  # from the newest checkpoint, not the pointer


def _never_run(state: PipelineState) -> dict[str, Any]:  # update_state applies an edit through the node's writers
    raise RuntimeError("the editor graph is only written through update_state")


_editors: weakref.WeakKeyDictionary[Any, Editor] = weakref.WeakKeyDictionary()


def _editor(graph: Graph) -> Editor:
    """The one-node graph edits are written by, on `graph`'s checkpointer (compiled once per checkpointer)."""
    saver = graph.checkpointer
    editor = _editors.get(saver)
    if editor is None:
        builder = StateGraph(PipelineState, context_schema=RunContext)
        builder.add_node(EDIT, _never_run)
        builder.add_edge(START, EDIT)
        builder.add_edge(EDIT, END)
        editor = _editors[saver] = builder.compile(checkpointer=saver, name=EDIT)
    return editor


async def edit_messages(graph: Graph, session_id: str, updates: Sequence[AnyMessage | RemoveMessage]) -> None:
    await settle(graph, session_id)
    state = await snapshot(graph, session_id)
    await _editor(graph).aupdate_state(state.config, {"messages": list(updates)}, as_node=EDIT)


async def remove_messages(graph: Graph, session_id: str, message_ids: Sequence[str]) -> None:
    if message_ids:
        await edit_messages(graph, session_id, [RemoveMessage(id=message_id) for message_id in message_ids])


async def clear_messages(graph: Graph, session_id: str) -> None:
    await edit_messages(graph, session_id, [RemoveMessage(id=REMOVE_ALL_MESSAGES)])


async def find_snapshot(graph: Graph, session_id: str, message_id: str) -> StateSnapshot | None:
    """The latest checkpoint at rest (no pending task) whose conversation ends with `message_id`.

    A checkpoint with pending tasks would not do: restoring it applies the writes its finished
    tasks had already made, i.e. the messages that came after."""
    async for state in graph.aget_state_history(thread_config(session_id)):
        messages = state.values.get("messages") or []
        if messages and messages[-1].id == message_id and not state.next:
            return state
    return None


async def restore(graph: Graph, session_id: str, state: StateSnapshot) -> None:
    """Make an earlier checkpoint the thread's head again (a new checkpoint forked from it)."""
    await graph.aupdate_state(state.config, None, as_node=END)


async def save_answer(
    graph: Graph,
    turn: TurnIds,
    *,
    query: str,
    content: str,
    references: list[dict[str, Any]],
    stopped: bool,
    metadata: dict[str, Any] | None = None,
) -> None:
    """Write the assistant message of a turn that did not end normally (stopped, cancelled).

    Replaces a message with the same id; adds the user message too when the run was cancelled
    before its first checkpoint recorded it. `metadata`: what the run records on its answer (the
    assistant it ran with), also when it was stopped before the graph wrote one.
    """
    existing = {m.id: m for m in await messages_of(graph, turn.session_id)}
    updates: list[AnyMessage] = []
    if turn.user_message_id not in existing:
        updates.append(thread_messages.question(query, id=turn.user_message_id, request_id=turn.request_id))
    previous = existing.get(turn.assistant_message_id)
    if previous is not None and message_text(previous) == content and thread_messages.is_stopped(previous) == stopped and not updates:
        await settle(graph, turn.session_id)
        return
    kept = {**previous.additional_kwargs, **(metadata or {})} if previous is not None else metadata
    updates.append(thread_messages.answer(
        content, id=turn.assistant_message_id, request_id=turn.request_id, stopped=stopped,
        references=references or (thread_messages.references_of(previous) if previous is not None else ()),
        truncated=previous is not None and thread_messages.is_truncated(previous), metadata=kept))
    await edit_messages(graph, turn.session_id, updates)
