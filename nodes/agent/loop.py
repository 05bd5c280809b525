"""What the agent loop's nodes share: the turn's citation registry, the tools offered, the prompt the
model reads (from prompts/agent.yaml), the injected messages, the limits, and one streamed round."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage

from ragline import prompts
from ragline.citations import Registry, SourceChunk
from ragline.contracts import events, thread_messages
from ragline.contracts.agent_state import AgentState
from ragline.contracts.context import RunContext
from ragline.generation.answer import chat_options
from ragline.generation.vision import ImageRef, context_image_parts, supports_vision
from ragline.mcp_client.oauth import AuthorizationRequired
from ragline.models.chat import ChatClient, StreamEnd
from ragline.models.tool_calls import ToolCallRequest
from ragline.nodes.agent.authorize import user_of
from ragline.nodes.tools import DEFAULT_TOOLS, TOOLS, AgentTool
from ragline.nodes.tools.mcp import mcp_tools
from ragline.services import Services


def turn_registry(state: AgentState) -> Registry:
    """The answer's one citation registry, rebuilt with every passage the model was given, in order."""
    registry = Registry(citations_enabled=state["request"].citations_enabled)
    registry.register_context([SourceChunk.model_validate(s) for s in state.get("sources", [])])
    return registry


async def offered_tools(context: RunContext, services: Services, declined: list[str] | None = None,
                        ) -> tuple[list[AgentTool], list[AuthorizationRequired]]:
    """The tools of this turn: Ragline's that its assistant allows (DEFAULT_TOOLS when it names
    none), then those of the MCP servers it names (but the `declined`); and the servers that
    first need the user's authorization."""
    allowed = context.agent_tools or DEFAULT_TOOLS
    own = [tool for name, tool in TOOLS.items() if name in allowed]
    servers = [server for server in context.agent_mcp_servers if server not in (declined or [])]
    remote, unauthorized = await mcp_tools(services, servers, user_of(context))
    return own + remote, unauthorized


def history(state: AgentState) -> list[dict[str, Any]]:
    """Earlier rounds of the conversation as text (this turn's question and injected messages are not history)."""
    rounds = max(state["request"].max_history_rounds, 0)
    this_turn = state["turn"].request_id
    earlier = [m for m in state.get("messages", []) if isinstance(m, HumanMessage | AIMessage) and m.text.strip()
               and thread_messages.round_of(m) != this_turn]
    kept = earlier[-2 * rounds :] if rounds else []
    return [{"role": "user" if isinstance(m, HumanMessage) else "assistant", "content": m.text} for m in kept]


def prompt(state: AgentState, registry: Registry) -> list[dict[str, Any]]:
    """What the model reads: the system prompt with the citation protocol, the earlier rounds, the
    question, then this turn's tool rounds."""
    return [{"role": "system", "content": registry.append_protocol(prompts.get("agent").text())}, *history(state),
            {"role": "user", "content": state["request"].query}, *state.get("conversation", [])]


async def tokens(client: ChatClient, messages: list[dict[str, Any]]) -> int:
    texts = [str(m.get("content") or "") + json.dumps(m.get("tool_calls") or "") for m in messages]
    return sum(await client.count_tokens(texts))


def rounds(conversation: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The loop's messages as rounds: an assistant message and the tool results that answer it (a
    summary of earlier rounds is a round of its own)."""
    rounds: list[list[dict[str, Any]]] = []
    for message in conversation:
        if message.get("role") == "tool" and rounds:
            rounds[-1].append(message)
        else:
            rounds.append([message])
    return rounds


async def images_message(state: AgentState, services: Services, registry: Registry) -> list[dict[str, Any]]:
    """For a model that sees: one user message with the images of the passages the tools returned,
    each labelled with its passage's handle; nothing for a text model or when there are none."""
    request = state["request"]
    found = list({image["url"]: image for image in state.get("tool_images", [])}.values())
    if not found or not supports_vision(request.chat_model or services.settings.chat_model, services.settings, request):
        return []
    given = {s["chunk_id"]: SourceChunk.model_validate(s) for s in state.get("sources", [])}
    refs = [ImageRef(registry.citable_alias(given[i["chunk_id"]]) if i["chunk_id"] in given else i["chunk_id"], i["url"]) for i in found]
    parts = await asyncio.to_thread(context_image_parts, refs, services.images.store)
    return [{"role": "user", "content": [{"type": "text", "text": prompts.get("agent", "images_note").text()}, *parts]}] if parts else []


async def injected(state: AgentState, context: RunContext) -> dict[str, Any]:
    """The messages the user sent while the loop ran (the host's inbox), as this step's user turns:
    each announced (user_message_injected) and kept in the conversation's history."""
    texts = [text for text in (await context.host.inbox() if context.host.inbox is not None else []) if text.strip()]
    turn, offset = state["turn"], sum(1 for m in state.get("messages", []) if thread_messages.is_injected(m))
    for text in texts:
        events.emit(context, events.user_message_injected(turn, text))
    kept = [thread_messages.injected_question(text, id=f"{turn.user_message_id}:injected:{offset + i}", request_id=turn.request_id)
            for i, text in enumerate(texts)]
    return {"conversation": [{"role": "user", "content": text} for text in texts], **({"messages": kept} if kept else {})}


def limit_reached(state: AgentState, settings: Any) -> tuple[str, int]:
    if state.get("rounds", 0) >= settings.agent_max_rounds:
        return "max_rounds", settings.agent_max_rounds
    if state.get("tool_calls_made", 0) >= settings.agent_max_tool_calls:
        return "max_tool_calls", settings.agent_max_tool_calls
    return "", 0


async def stream_round(client: ChatClient, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, state: AgentState,
                        registry: Registry, context: RunContext) -> tuple[str, str, str, StreamEnd, bool]:
    """One model call, its text streamed as the round's answer segment: (raw text, decoded text, thinking, end, stopped)."""
    turn, segment = state["turn"], state.get("rounds", 0)
    raw: list[str] = []
    shown: list[str] = []
    thinking: list[str] = []
    decoder = registry.stream_decoder()
    end, stopped = StreamEnd(None), False

    def show(text: str) -> None:
        if text:
            shown.append(text)
            events.emit(context, events.answer(turn, text, segment=segment))

    async for item in client.stream(messages, chat_options(state["request"]), tools=tools):
        if context.is_cancelled():
            stopped = True
            break
        if isinstance(item, StreamEnd):
            end = item
            break
        if item.kind == "thinking":
            thinking.append(item.text)
            events.emit(context, events.thinking(turn, item.text))
            continue
        raw.append(item.text)
        show(decoder.feed(item.text))
    show(decoder.flush())
    return "".join(raw), "".join(shown), "".join(thinking), end, stopped


def call_json(call: ToolCallRequest) -> dict[str, Any]:
    return {"id": call.id, "name": call.name, "arguments": call.arguments, "raw_arguments": call.raw_arguments, "error": call.error}
