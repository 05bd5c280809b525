"""The agent loop's compaction: near the token budget, the earlier tool rounds become the model's notes on them."""

from __future__ import annotations

import json
import logging
from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from ragline import defaults, prompts
from ragline.contracts import events
from ragline.contracts.agent_state import AgentState
from ragline.contracts.context import RunContext, context_of
from ragline.generation.answer import chat_options
from ragline.models.chat import ChatModelError
from ragline.nodes.agent.loop import prompt, rounds, tokens, turn_registry
from ragline.services import services_of

log = logging.getLogger(__name__)


async def compact(state: AgentState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Near the loop's token budget, replace the tool rounds before the last one with the model's
    notes on them (source handles kept, so citations still resolve), and say so (context_compacted).
    Below it, or with only one round to keep, nothing changes."""
    context, services = context_of(runtime), services_of(runtime)
    request, settings = state["request"], services.settings
    client = services.chat(request.chat_model)
    registry = turn_registry(state)
    before = await tokens(client, prompt(state, registry))
    done = rounds(state.get("conversation", []))
    if before <= settings.agent_context_tokens * defaults.AGENT_COMPACT_SHARE or len(done) < 2:
        return {}
    earlier, last = done[:-1], done[-1]
    shown = "\n\n".join(f"{m['role']}: {m.get('content') or ''}{' ' + json.dumps(m['tool_calls']) if m.get('tool_calls') else ''}"
                         for round_ in earlier for m in round_)
    asked = prompts.render(prompts.get("agent", "compact").text(), question=request.query, rounds=shown)
    try:
        notes = await client.chat([{"role": "user", "content": asked}], chat_options(request))
    except ChatModelError as exc:
        log.warning("agent compaction skipped: %s", exc)  # the loop goes on uncompacted; the limits still bound it
        return {}
    conversation = [{"role": "assistant", "content": f"My notes from {len(earlier)} earlier tool rounds:\n{notes.content.strip()}"}, *last]
    after = await tokens(client, prompt({**state, "conversation": conversation}, registry))
    events.emit(context, events.context_compacted(state["turn"], rounds=len(earlier), tokens_before=before, tokens_after=after))
    return {"conversation": Overwrite(conversation)}
