"""The agent loop's model call: the next step is tool calls (run next) or the answer (graph/agent.py)."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from ragline import prompts
from ragline.contracts import events
from ragline.contracts.agent_state import AgentState
from ragline.contracts.context import RunContext, context_of
from ragline.contracts.state import ChatResponse
from ragline.generation.answer import is_truncation, model_error_update
from ragline.models.chat import ChatModelError
from ragline.nodes.agent.approval import announce
from ragline.nodes.agent.authorize import ask
from ragline.nodes.agent.loop import call_json, images_message, injected, limit_reached, offered_tools, prompt, stream_round, turn_registry
from ragline.services import services_of


async def model(state: AgentState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Ask the chat model for the next step: tool calls (run next) or the answer.

    Sends the system prompt with the citation protocol, the earlier rounds, the question and this
    turn's tool rounds; offers the assistant's tools unless a limit is reached, in which case a
    `reflection` says which and the model is told to answer with what it has. When an MCP server
    of the turn needs the user's authorization first, asks for it instead (nodes/agent/authorize.py).
    """
    context, services = context_of(runtime), services_of(runtime)
    request, turn = state["request"], state["turn"]
    client = services.chat(request.chat_model)
    registry = turn_registry(state)
    limit, value = limit_reached(state, services.settings)
    offered, unauthorized = ([], []) if limit else await offered_tools(context, services, state.get("oauth_declined"))
    asking = ask(turn, unauthorized, state, context)
    if asking:
        return asking
    arrived = await injected(state, context)
    messages = prompt(state, registry) + await images_message(state, services, registry) + arrived["conversation"]
    update: dict[str, Any] = dict(arrived)
    if limit:
        note = prompts.render(prompts.get("agent", limit).text(), value=value)
        if not state.get("limit"):
            events.emit(context, events.reflection(turn, note + " Answering with what was found.", data={"limit": limit, "value": value}))
            update["limit"] = limit
        messages.append({"role": "user", "content": note + prompts.get("agent", "answer_now").text()})
    tools = None if limit else [tool.schema() for tool in offered] or None
    try:
        raw, shown, thinking, end, stopped = await stream_round(client, messages, tools, state, registry, context)
    except ChatModelError as exc:
        return model_error_update(turn, context, exc)
    calls = [] if limit or stopped else list(end.tool_calls)
    if calls:
        if shown.strip():
            events.emit(context, events.thought(turn, shown, segment=state.get("rounds", 0)))
        said = {"role": "assistant", "content": raw or None, "tool_calls": [call.as_wire() for call in calls]}
        waiting = announce(turn, calls, {call.id: registry.decode_tool_arguments(call.arguments) for call in calls}, context)
        return {**update, "conversation": [*update["conversation"], said], "pending_calls": [call_json(c) for c in calls],
                "awaiting_approval": waiting, "rounds": state.get("rounds", 0) + 1}
    truncated = is_truncation(end.finish_reason)
    return {**update, "conversation": [*update["conversation"], {"role": "assistant", "content": raw}], "pending_calls": [], "answer_text": shown,
            "answer_thinking": thinking, "finish_reason": "stop" if stopped else end.finish_reason,
            "chat_response": ChatResponse(content=shown, thinking=thinking, finish_reason=end.finish_reason, truncated=truncated,
                                          stopped=stopped, model=client.model, usage=end.usage)}
