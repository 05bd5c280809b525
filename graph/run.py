"""Run one user turn and yield its events, as a host (CLI, HTTP service) sees them.

The host's frame around the graph's own events: agent_query first (with the ids a client needs to
resume), then whatever the stages emit, then complete last — also after an error or a stop.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from langgraph.graph.state import CompiledStateGraph

from ragline.graph import events
from ragline.graph.context import RunContext
from ragline.graph.events import StreamResponse
from ragline.graph.request import PipelineRequest
from ragline.graph.state import TurnIds


def with_ids(context: RunContext) -> RunContext:
    """Fill the ids the caller left empty, so the first event can already carry them."""
    return replace(
        context,
        session_id=context.session_id or str(uuid.uuid4()),
        request_id=context.request_id or str(uuid.uuid4()),
        user_message_id=context.user_message_id or str(uuid.uuid4()),
        assistant_message_id=context.assistant_message_id or str(uuid.uuid4()),
    )


def turn_of(context: RunContext) -> TurnIds:
    return TurnIds(context.session_id, context.request_id, context.user_message_id, context.assistant_message_id)


async def stream_turn(
    graph: CompiledStateGraph,
    request: PipelineRequest,
    context: RunContext | None = None,
    config: dict[str, Any] | None = None,
) -> AsyncIterator[StreamResponse]:
    """Events of one turn on the session's thread (config's thread_id defaults to the session id)."""
    context = with_ids(context or RunContext())
    turn = turn_of(context)
    config = {**(config or {})}
    config.setdefault("configurable", {}).setdefault("thread_id", context.session_id)
    yield events.agent_query(turn, request.query)
    failed = False
    try:
        async for chunk in graph.astream({"request": request}, config, context=context, stream_mode="custom"):
            event = StreamResponse.model_validate(chunk)
            failed = failed or event.response_type == events.ResponseType.ERROR
            yield event
    except Exception as exc:  # an unexpected failure still ends the stream in an orderly way
        if not failed:
            yield events.error(turn, f"the pipeline failed: {exc}", code="internal")
    yield events.complete(turn, stopped=context.is_cancelled())
