"""memory_recall: the caller's long-term memories for this question (seed: memory_recall.go, PluginMemoryRecall).

The caller's memories (tenant + user of the run context, from the services' memory store)
closest to the question go into `memory_prompt`, and a memory_recalled event tells the client which ones were
used. No chat model is called, and nothing here can stop the answer: a failing store or
embedder, or a slow one, just means no memories this turn.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from langgraph.runtime import Runtime

from ragline import defaults
from ragline.contracts import events
from ragline.contracts.context import RunContext, context_of
from ragline.contracts.state import PipelineState
from ragline.memory.service import Caller, render_memory_prompt
from ragline.services import services_of

log = logging.getLogger(__name__)


def caller_of(context: RunContext) -> Caller:
    """Tenant + user of the run: each user of a tenant has memories of their own."""
    return Caller(context.tenant_id or "default", context.user_id or "default")


async def memory_recall(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Recall the caller's memories closest to the question into memory_prompt.

    Reads request.query; writes memory_prompt and emits memory_recalled when something was
    recalled.
    """
    query = state["request"].query
    if not query.strip():
        return {}
    context = context_of(runtime)
    services = services_of(runtime)
    try:
        # opened off the event loop: the first call opens the store and the embedding cache (file I/O)
        memory = services.memory if services.is_open("memory") else await asyncio.to_thread(lambda: services.memory)
        memories = await asyncio.wait_for(
            memory.search(caller_of(context), query, defaults.MEMORY_RECALL_LIMIT, services.settings.memory_min_score,
                          defaults.MEMORY_RECALL_MARGIN),
            defaults.MEMORY_RECALL_TIMEOUT_S,
        )
    except Exception as exc:  # the seed's rule: a memory failure never interrupts the answer
        log.warning("memory_recall skipped: %s", exc)
        return {}
    if not memories:
        return {}
    if "turn" in state:
        events.emit(context, events.memory_recalled(state["turn"], [m.event_item() for m in memories]))
    return {"memory_prompt": render_memory_prompt(memories)}
