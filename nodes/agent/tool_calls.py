"""The agent loop's tool calls: each call of the model's last reply run (nodes/tools/), or answered with why not."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from ragline.citations import SourceChunk
from ragline.contracts import events
from ragline.contracts.agent_state import AgentState
from ragline.contracts.context import RunContext, context_of
from ragline.models.tool_calls import ToolCallRequest
from ragline.nodes.agent.loop import offered_tools, turn_registry
from ragline.nodes.tools import ToolContext
from ragline.services import services_of


async def tool_calls(state: AgentState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Run the tool calls of the model's last reply, in order; each call's result (or its error)
    becomes the tool message the model reads next round. A call beyond the tool-call limit, with
    malformed arguments, naming a tool it was not offered or a handle this answer never issued is
    answered with that error and not run; a tool that raises is answered with its error."""
    context, services = context_of(runtime), services_of(runtime)
    request, turn = state["request"], state["turn"]
    registry = turn_registry(state)
    offered = {tool.name: tool for tool in (await offered_tools(context, services, state.get("oauth_declined")))[0]}
    budget = services.settings.agent_max_tool_calls - state.get("tool_calls_made", 0)
    tool_context = ToolContext(services, context.tenant_id, tuple(request.knowledge_base_ids), registry, context.user_id,
                               context.groups, context.key_knowledge_bases)
    answered: list[dict[str, Any]] = []
    given: list[SourceChunk] = []
    images: list[dict[str, str]] = []
    calls = [ToolCallRequest(**call) for call in state.get("pending_calls", [])]
    for index, call in enumerate(calls):
        arguments = registry.decode_tool_arguments(call.arguments)
        events.emit(context, events.agent_tool_call(turn, call.id, call.name, arguments))
        error, content = "", ""
        unresolved = registry.unresolved_handles(arguments)
        if index >= budget:
            error = f"not run: the limit of {services.settings.agent_max_tool_calls} tool calls for this question is reached"
        elif call.error:
            error = call.error
        elif call.id in state.get("denied", {}):
            reason = state["denied"][call.id]
            error = f"not run: the user denied this call{': ' + reason if reason else ''}"
        elif call.name not in offered:
            error = f"no tool {call.name!r}; the tools are {', '.join(offered) or 'none'}"
        elif unresolved:
            error = f"unknown handles {', '.join(unresolved)}: use only handles the tool results gave"
        else:
            try:
                outcome = await offered[call.name].run(arguments, tool_context)
            except Exception as exc:  # any failure of a tool is the model's to handle, never the turn's
                error = f"{type(exc).__name__}: {exc}"
            else:
                content = outcome.content
                given += outcome.sources
                images += outcome.images
                events.emit(context, events.agent_tool_result(turn, call.id, call.name, success=True, output=outcome.summary))
        if error:
            events.emit(context, events.agent_tool_result(turn, call.id, call.name, success=False, error=error))
            content = f"Error: {error}"
        answered.append({"role": "tool", "tool_call_id": call.id, "content": content})
    return {"conversation": answered, "sources": [s.model_dump(mode="json") for s in given], "tool_images": images, "pending_calls": [],
            "tool_calls_made": state.get("tool_calls_made", 0) + len(calls)}
