"""The agent turn's end: the references of every passage given to the model, then the terminal answer."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from ragline.citations import SourceChunk
from ragline.citations.references import build_references, references_payload
from ragline.contracts import events
from ragline.contracts.agent_state import AgentState
from ragline.contracts.context import RunContext, context_of
from ragline.contracts.state import ChatResponse
from ragline.generation.answer import assistant_message


async def answer(state: AgentState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """End the answer (its text went out as the last round's segment): `references` with every
    passage given to the model, across rounds, then the terminal `answer`; the conversation keeps
    the answer, with its references and the assistant it ran with."""
    if state.get("error") is not None:
        return {}
    context, turn = context_of(runtime), state["turn"]
    response = state.get("chat_response") or ChatResponse(content=state.get("answer_text", ""))
    passages = list({s["chunk_id"]: SourceChunk.model_validate(s) for s in state.get("sources", [])}.values())
    events.emit(context, events.references(turn, references_payload(passages)))
    events.emit(context, events.answer(turn, "", done=True, truncated=response.truncated))
    message = assistant_message(turn, response, build_references(passages), metadata=context.answer_metadata())
    return {"messages": [message]}
