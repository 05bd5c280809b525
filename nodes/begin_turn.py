"""begin_turn: start one user turn on the session's thread.

Replaces the per-request ChatManage the seed's KnowledgeQA builds: fixes the turn's ids (kept in
the checkpoint so a resumed run keeps them), resets every per-turn key so nothing leaks from the
previous turn, and records the user's message in the conversation at once (IsCompleted=true).
"""

from __future__ import annotations

import uuid
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from ragline.graph.context import RunContext, context_of
from ragline.graph.state import PER_TURN_ACCUMULATING, PER_TURN_RESET, PipelineState, TurnIds


def new_turn_ids(context: RunContext) -> TurnIds:
    return TurnIds(
        session_id=context.session_id or str(uuid.uuid4()),
        request_id=context.request_id or str(uuid.uuid4()),
        user_message_id=context.user_message_id or str(uuid.uuid4()),
        assistant_message_id=context.assistant_message_id or str(uuid.uuid4()),
    )


async def begin_turn(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Fix the turn's ids, clear last turn's results and append the user message."""
    request = state["request"]
    turn = new_turn_ids(context_of(runtime))
    user_message = HumanMessage(
        content=request.query,
        id=turn.user_message_id,
        additional_kwargs={"request_id": turn.request_id, "images": [image.url for image in request.images]},
    )
    return {
        "turn": turn,
        **PER_TURN_RESET,
        **{key: Overwrite([]) for key in PER_TURN_ACCUMULATING},
        "messages": [user_message],
    }
