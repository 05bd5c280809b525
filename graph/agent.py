"""Agent mode: a tool-calling model uses Ragline's services as tools, in a loop, then answers.

The seed's ReAct agent (agent_system_prompt.yaml, AgentStreamHandler) as a LangGraph graph of its
own, on the pipeline's services container (reached through RunContext.host.services), state and turn.
The nodes are in nodes/agent/, their texts in prompts/agent.yaml; this module writes the loop out:

    begin_turn -> model -> ([authorize -> model] | [approval ->] tools -> compact -> model)* -> answer

- `model` calls the chat model with the conversation so far and the tools the assistant allows.
  Its text streams as `answer` deltas of the round's segment; when the reply asks for tools, that
  text was an introduction: a `thought` marks the segment superseded (the seed's answerSegments).
- `authorize` (nodes/agent/authorize.py): an MCP server that needs the user's authorization first
  pauses the turn before the model is asked (mcp_oauth_required, an interrupt; resolved on resume).
- `approval` (nodes/agent/approval.py): calls to tools the assistant marks as needing approval wait for
  the user's decision (tool_approval_required, an interrupt; resolved on resume).
- `tools` runs each call (nodes/tools/): `tool_call`, then `tool_result` with success true, or
  false with the error, which goes back to the model as the call's result; the loop goes on.
- `compact`: when the loop's prompt nears its token budget (settings agent_context_tokens, past
  AGENT_COMPACT_SHARE of it), the model summarises the tool rounds before the last one, their
  source handles kept, and a `context_compacted` says how many rounds and tokens it saved.
- A model that sees (generation/vision.py supports_vision) gets the pictures of the passages the
  tools returned, after the tool rounds, each labelled with its passage's handle (at most
  CONTEXT_IMAGES_MAX; the state keeps their identities, the bytes are read for each call).
- `answer` sends `references` (every passage the tools gave the model, every round) and ends
  the answer; the conversation keeps it, with the assistant it ran with.
- Limits (settings agent_max_rounds, agent_max_tool_calls): when one is reached, a `reflection`
  says so and the model is asked, without tools, to answer with what it has.
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from ragline.contracts.agent_state import AgentState
from ragline.contracts.context import RunContext
from ragline.graph.binding import HostDefaults
from ragline.nodes.agent.answer import answer
from ragline.nodes.agent.approval import approval
from ragline.nodes.agent.authorize import authorize
from ragline.nodes.agent.begin import begin
from ragline.nodes.agent.compact import compact
from ragline.nodes.agent.model import model
from ragline.nodes.agent.tool_calls import tool_calls
from ragline.services import Services

AGENT_GRAPH = "ragline_agent"


def after_model(state: AgentState) -> Literal["authorize", "approval", "tools", "answer"]:
    """An MCP server to authorize first goes to `authorize`; tool calls go to `tools`, through
    `approval` when one waits for the user; a reply without any (or a failed call) goes to `answer`."""
    if state.get("awaiting_authorization") and state.get("error") is None:
        return "authorize"
    if not state.get("pending_calls") or state.get("error") is not None:
        return "answer"
    return "approval" if state.get("awaiting_approval") else "tools"


# --- the graph -------------------------------------------------------------------------------

AgentGraph = CompiledStateGraph[AgentState, RunContext, AgentState, AgentState]


def build_agent_graph(*, checkpointer: Any = None, services: Services | None = None) -> AgentGraph:
    """The compiled agent graph; `services` serves runs whose context brings none (Studio, a parent graph)."""
    bound = HostDefaults(services=services)
    graph = StateGraph(AgentState, context_schema=RunContext)
    graph.add_node("begin_turn", bound(begin))
    graph.add_node("model", bound(model))
    graph.add_node("authorize", bound(authorize))
    graph.add_node("approval", bound(approval))
    graph.add_node("tools", bound(tool_calls))
    graph.add_node("compact", bound(compact))
    graph.add_node("answer", bound(answer))
    graph.add_edge(START, "begin_turn")
    graph.add_edge("begin_turn", "model")
    graph.add_conditional_edges("model", after_model)
    graph.add_edge("authorize", "model")
    graph.add_edge("approval", "tools")
    graph.add_edge("tools", "compact")
    graph.add_edge("compact", "model")
    graph.add_edge("answer", END)
    return graph.compile(checkpointer=checkpointer, name=AGENT_GRAPH)
