"""Runtime handles of one run (the seed's PipelineContext): never written into checkpoints.

Passed as LangGraph runtime context: `graph.astream(input, config, context=RunContext(...))`.
Studio shows the serialisable fields as a form; `host` (RunHost: the services, the event sink,
the cancel flag, the inbox) is set by the code that hosts the run (CLI, HTTP service, a parent graph).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Protocol

from pydantic import InstanceOf
from pydantic.json_schema import SkipJsonSchema

from ragline.contracts.access import Principal
from ragline.contracts.request import AgentConfig
from ragline.contracts.state import TurnIds
from ragline.contracts.thread_messages import ASSISTANT_ID, ASSISTANT_VERSION
from ragline.settings import Settings

EventSink = Callable[[Any], None]
Inbox = Callable[[], Awaitable[list[str]]]


class RunServices(Protocol):
    """What a run's stages are handed by their host: the composition root (`ragline.services.Services`,
    which stages reach through `services_of(runtime)`). Named here by what every root has, so the
    turn's contracts depend on no container."""

    settings: Settings


class ExclusiveSink:
    """An event sink that delivers every event itself: `events.emit` then skips LangGraph's custom
    stream, and the graph's own stream carries no events. For a host that appends a stage's events
    where they are emitted (service/relay.py), a task switch fewer per answer token than reading
    them back out of the graph's stream."""

    def __call__(self, event: Any) -> None:
        raise NotImplementedError


class Framing(StrEnum):
    """Who sends a turn's frame: `agent_query` before the graph's events, `complete` after them."""

    HOST = "host"  # a turn driver hosts the run (the HTTP service, the CLI, the evaluation): it frames the turn
    GRAPH = "graph"  # nothing around the graph does (Studio, a parent graph, an agent's tool): begin_turn opens, the last answer or error closes


@dataclass
class RunHost:
    """The handles the code hosting a run (CLI, HTTP service, Studio, a parent graph) gives its
    stages: the composition root and the run's channels. Never JSON, never checkpointed."""

    services: RunServices | None = None
    """ragline.services.Services, the composition root (a graph compiled with services fills it in)."""
    event_sink: EventSink | None = None
    """Receives every StreamResponse; LangGraph's custom stream is used as well, unless it is an ExclusiveSink."""
    cancel_event: threading.Event | None = None
    """Set when the user stops the run. A host that gives one stops runs itself and saves what was shown."""
    inbox: Inbox | None = None
    """Returns the messages sent while the run runs (agent mode injects them at its next step)."""
    framing: Framing = Framing.GRAPH
    """Who frames the turn; a turn driver declares itself (graph/turn.py), any other host leaves it to the graph."""


@dataclass
class RunContext:
    session_id: str = field(default="", metadata={"description": "Session (thread) the turn belongs to; generated when empty."})
    request_id: str = field(default="", metadata={"description": "Id pairing the user and assistant messages of this turn; generated when empty."})
    user_message_id: str = field(default="", metadata={"description": "Id of the user message; generated when empty."})
    assistant_message_id: str = field(default="", metadata={"description": "Id of the assistant message; generated when empty."})
    tenant_id: str = field(default="default", metadata={"description": "Tenant whose knowledge bases may be searched."})
    user_id: str = field(default="default", metadata={"description": "User asking (with the tenant: whose long-term memories are recalled)."})
    groups: tuple[str, ...] = field(default=(), metadata={"description": "The user's groups: documents restricted to one of them are readable."})
    key_knowledge_bases: tuple[str, ...] | None = field(default=None, metadata={"description": "The knowledge bases the caller's key is limited to (unset: any the user may read)."})
    agent: AgentConfig | None = field(default=None, metadata={"description": "Defaults for every request setting (the seed's agent configuration); a request's explicit values win."})
    assistant_id: str = field(default="", metadata={"description": "The stored assistant whose configuration `agent` is (service/assistants.py); recorded on the answer."})
    assistant_version: int = field(default=0, metadata={"description": "The version of that assistant; recorded on the answer."})
    agent_tools: tuple[str, ...] = field(default=(), metadata={"description": "Agent mode: the tools the assistant allows (graph/agent.py); empty offers nodes/tools DEFAULT_TOOLS (not the web tools)."})
    approval_tools: tuple[str, ...] = field(default=(), metadata={"description": "Agent mode: the tools whose calls wait for the user's approval (nodes/agent/approval.py); an MCP server's name: each of its tools."})
    agent_mcp_servers: tuple[str, ...] = field(default=(), metadata={"description": "Agent mode: the MCP servers (of settings agent_mcp_servers) whose tools the agent may call."})
    host: SkipJsonSchema[InstanceOf[RunHost]] = field(default_factory=RunHost, repr=False, metadata={"description": "What the code hosting the run hands its stages (not JSON: left out of Studio's form)."})

    def principal(self) -> Principal:
        """Who the run reads knowledge for (contracts/access.py decides what that is)."""
        scope = frozenset(self.key_knowledge_bases) if self.key_knowledge_bases is not None else None
        return Principal(self.tenant_id, self.user_id, frozenset(self.groups), scope)

    def answer_metadata(self) -> dict[str, Any]:
        """What the answer's message records of the run: the assistant (and version) it ran with."""
        return {ASSISTANT_ID: self.assistant_id, ASSISTANT_VERSION: self.assistant_version} if self.assistant_id else {}

    def cancel(self) -> None:
        """Ask the run to stop: its stages check before the next model call (and the host cancels it after a grace)."""
        if self.host.cancel_event is None:
            self.host.cancel_event = threading.Event()
        self.host.cancel_event.set()

    def is_cancelled(self) -> bool:
        return self.host.cancel_event is not None and self.host.cancel_event.is_set()


def context_of(runtime: Any) -> RunContext:
    """The run's context, or an empty one when the caller gave none (Studio, a parent graph)."""
    context = getattr(runtime, "context", None)
    return context if isinstance(context, RunContext) else RunContext()


def _thread_id() -> str:
    """The running graph's thread id (Studio, a parent graph), or '' outside a run or without one."""
    try:
        from langgraph.config import get_config

        return str((get_config().get("configurable") or {}).get("thread_id") or "")
    except RuntimeError:
        return ""


def with_turn_ids(context: RunContext) -> RunContext:
    """The context with every id the caller left empty minted (the one place ids are made). A
    session is a thread: without a session id, the turn belongs to the run's thread."""
    return replace(
        context,
        session_id=context.session_id or _thread_id() or str(uuid.uuid4()),
        request_id=context.request_id or str(uuid.uuid4()),
        user_message_id=context.user_message_id or str(uuid.uuid4()),
        assistant_message_id=context.assistant_message_id or str(uuid.uuid4()),
    )


def turn_ids(context: RunContext) -> TurnIds:
    context = with_turn_ids(context)
    return TurnIds(context.session_id, context.request_id, context.user_message_id, context.assistant_message_id)
