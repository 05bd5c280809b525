"""The stores behind the service, chosen once from settings (seed: stream/factory.go + container).

| settings | checkpoints | sessions, assistants | event streams | runs (registry) |
| --- | --- | --- | --- | --- |
| checkpointer=memory | in memory | in memory | in process | in process |
| checkpointer=sqlite (default) | data_dir/service/checkpoints.sqlite | sessions.sqlite, assistants.sqlite beside it | in process | in process |
| checkpointer=redis (default with redis_url) | langgraph-checkpoint-redis | Redis | Redis Streams | Redis: leases, takeover |

Runs survive the death of their process only when checkpoints, streams and the registry are all in
Redis, since another replica must see all three to take a run over.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from langgraph.checkpoint.base import BaseCheckpointSaver

from ragline.checkpoints.redis_streams import RedisStreamManager
from ragline.checkpoints.savers import (
    memory_saver,
    redis_saver,
    sqlite_saver,
)
from ragline.checkpoints.streams import MemoryStreamManager, StreamManager
from ragline.graph.graphs import Graph
from ragline.graph.turn import Durability
from ragline.service.assistants import (
    AssistantStore,
    MemoryAssistantStore,
    RedisAssistantStore,
    SqliteAssistantStore,
)
from ragline.service.registry import MemoryRunRegistry, RedisRunRegistry, RunRegistry
from ragline.service.sessions import (
    MemorySessionStore,
    RedisSessionStore,
    SessionStore,
    SqliteSessionStore,
)
from ragline.settings import Settings

if TYPE_CHECKING:
    from ragline.graph.agent import AgentGraph
    from ragline.services import Services


class BackendConfigError(ValueError):
    """Settings that cannot work together (e.g. Redis chosen without a URL)."""


def checkpointer_kind(settings: Settings) -> str:
    return settings.checkpointer or ("redis" if settings.redis_url else "sqlite")


def stream_kind(settings: Settings) -> str:
    return settings.stream_manager or ("redis" if checkpointer_kind(settings) == "redis" else "memory")


@dataclass
class Backend:
    settings: Settings
    graph: Graph  # the pipeline: turns without an agent-mode assistant, and every edit of a session's thread
    agent_graph: AgentGraph  # agent mode (graph/agent.py), on the same checkpointer and threads
    checkpointer: BaseCheckpointSaver
    streams: StreamManager
    registry: RunRegistry
    sessions: SessionStore
    assistants: AssistantStore
    redis: Any = None  # redis.asyncio.Redis when one is configured

    @property
    def durability(self) -> Durability:
        return self.settings.durability

    def graph_for(self, kind: str) -> Graph:
        """The graph a run record names (RunRecord.graph): the agent graph for "agent", else the pipeline.
        Both take the same input and run context, and share the thread's state keys."""
        return cast(Graph, self.agent_graph) if kind == "agent" else self.graph

    def describe(self) -> dict[str, str]:
        return {
            "checkpointer": checkpointer_kind(self.settings),
            "streams": stream_kind(self.settings),
            "runs": "redis" if self.registry.durable else "memory",
        }


@asynccontextmanager
async def open_backend(services: Services, graph_name: str = "ragline") -> AsyncIterator[Backend]:
    """The run backend of the root `services`, on its settings and its Redis client for runs."""
    from ragline.graph.agent import build_agent_graph
    from ragline.graph.graphs import build_graph

    settings = services.settings
    checkpoints, streams_kind = checkpointer_kind(settings), stream_kind(settings)
    needs_redis = "redis" in (checkpoints, streams_kind)
    if needs_redis and not settings.redis_url:
        raise BackendConfigError("Redis was chosen for checkpoints or streams but RAGLINE_REDIS_URL is not set")
    url = settings.redis_url or ""
    async with AsyncExitStack() as stack:
        redis: Any = None
        if needs_redis:
            redis = services.redis_async("runs")
            await redis.ping()
        service_dir = settings.data_dir / "service"
        sessions: SessionStore
        if checkpoints == "memory":
            saver: BaseCheckpointSaver = memory_saver()
            sessions = MemorySessionStore()
        elif checkpoints == "sqlite":
            saver = await stack.enter_async_context(sqlite_saver(service_dir / "checkpoints.sqlite"))
            sessions = SqliteSessionStore(service_dir / "sessions.sqlite")
        else:
            saver = await stack.enter_async_context(redis_saver(url))
            sessions = RedisSessionStore(redis)
        stack.push_async_callback(sessions.aclose)
        assistants = assistant_store(checkpoints, settings, redis)
        stack.push_async_callback(assistants.aclose)
        streams: StreamManager = RedisStreamManager(redis) if streams_kind == "redis" else MemoryStreamManager()
        stack.push_async_callback(streams.aclose)
        registry: RunRegistry = (
            RedisRunRegistry(redis) if checkpoints == "redis" and streams_kind == "redis" else MemoryRunRegistry()
        )
        graph = build_graph(graph_name, checkpointer=saver)
        agent_graph = build_agent_graph(checkpointer=saver)
        yield Backend(settings, graph, agent_graph, saver, streams, registry, sessions, assistants, redis)


def assistant_store(checkpoints: str, settings: Settings, redis: Any) -> AssistantStore:
    """Assistants kept beside the sessions: in memory, in data_dir/service, or in the shared Redis."""
    if checkpoints == "memory":
        return MemoryAssistantStore()
    if checkpoints == "sqlite":
        return SqliteAssistantStore(settings.data_dir / "service" / "assistants.sqlite")
    return RedisAssistantStore(redis)


@asynccontextmanager
async def open_assistant_store(services: Services) -> AsyncIterator[AssistantStore]:
    """The store `ragline serve` with these settings keeps its assistants in, for a host without
    the rest of the backend (the CLI)."""
    settings = services.settings
    kind = checkpointer_kind(settings)
    if kind == "redis" and not settings.redis_url:
        raise BackendConfigError("Redis was chosen for checkpoints but RAGLINE_REDIS_URL is not set")
    async with AsyncExitStack() as stack:
        redis = services.redis_async("runs") if kind == "redis" else None
        store = assistant_store(kind, settings, redis)
        stack.push_async_callback(store.aclose)
        yield store
