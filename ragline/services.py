"""The composition root: every long-lived service the stages call, built once from settings, and
the clients and stores under them (Redis clients, local model engines). It holds knowledge and
models only: the run backend (checkpoints, streams, run registry, compiled graphs) belongs to the
host that runs turns (service/backend.py `open_backend`), so the root never contains the graph
that reads it.

Replaces the seed's DI container (internal/container/container.go). Every host builds one
`Services` and hands it to each run through `RunContext.host.services`: the CLI, the HTTP service,
`langgraph dev` (graph/graphs.py) and a parent graph that embeds ours. Nothing else opens a
store or picks a model: nodes ask `services_of(runtime)`.

Heavy parts open on first use, once, behind a lock, so a pure-chat turn never opens Chroma and
`ragline --help` never loads a model.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ragline.contracts.access import Principal
from ragline.settings import Settings, get_settings

if TYPE_CHECKING:
    import redis
    from langgraph.store.base import BaseStore
    from redis.asyncio import Redis as AsyncRedis

    from ragline.entities.store import GraphStore
    from ragline.ingestion.image_chunks import ImageIndexer
    from ragline.ingestion.service import IngestionService
    from ragline.ingestion.wiki_scheduler import WikiScheduler
    from ragline.mcp_client.client import McpClient
    from ragline.memory.service import MemoryService
    from ragline.models.chat import ChatClient
    from ragline.models.embeddings import Embedder
    from ragline.models.intents import ExemplarIntents
    from ragline.models.local_engine import LocalEngines
    from ragline.models.rerank import Reranker
    from ragline.retrieval.stack import RetrievalStack
    from ragline.retrieval.types import Knowledge, KnowledgeBase
    from ragline.tabular.analysis import TabularAnalysis
    from ragline.web.fetch import WebFetcher
    from ragline.web.search import WebSearch

T = TypeVar("T")
log = logging.getLogger(__name__)


class Lazy(Generic[T]):
    """`factory`'s value, built by the first `get` (the others wait for it) and kept."""

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._value: T | None = None
        self._lock = threading.Lock()

    def get(self) -> T:
        with self._lock:
            if self._value is None:
                self._value = self._factory()
            return self._value

    @property
    def opened(self) -> T | None:
        """The value if it was built, without building it."""
        return self._value


class ServicesMissingError(RuntimeError):
    """A node ran without services: the host gave the run no RunContext.services."""


@dataclass
class Services:
    """Retrieval, entity graph, memory, model clients, web and tabular analysis of one process."""

    settings: Settings = field(default_factory=get_settings)
    # Factories replace how a part is opened (tests, a host with stores of its own); each runs once.
    embedder_factory: Callable[[], Embedder] | None = None
    retrieval_factory: Callable[[], RetrievalStack] | None = None
    graph_store_factory: Callable[[], GraphStore] | None = None
    memory_store_factory: Callable[[], BaseStore] | None = None
    _lazies: dict[str, Lazy[Any]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def from_settings(cls, settings: Settings | None = None, **factories: Any) -> Services:
        return cls(settings or get_settings(), **factories)

    def _once(self, name: str, factory: Callable[[], T]) -> T:
        with self._lock:
            lazy = self._lazies.setdefault(name, Lazy(factory))
        return lazy.get()

    def is_open(self, name: str) -> bool:
        """Whether a part (e.g. "retrieval") was opened already: cleanup need not open it."""
        lazy = self._lazies.get(name)
        return lazy is not None and lazy.opened is not None

    async def open_off_the_loop(self, *names: str) -> None:
        """Open these parts (properties such as "retrieval") in a worker thread: they read files and
        load models, and a host whose event loop must never block (`langgraph dev`, a parent graph)
        opens what a turn reads before its first stage asks."""
        missing = [name for name in names if not self.is_open(name)]
        if missing:
            await asyncio.to_thread(lambda: [getattr(self, name) for name in missing])

    # --- knowledge ---

    @property
    def embedder(self) -> Embedder:
        from ragline.models.embeddings import Embedder

        return self._once("embedder", self.embedder_factory or (lambda: Embedder.from_settings(self.settings)))

    @property
    def image_embedder(self) -> Embedder | None:
        """The multimodal embedding model of image recall (RAGLINE_IMAGE_EMBEDDING_MODEL), None without one."""
        from ragline.models.embeddings import Embedder

        return self._once("image_embedder", lambda: Embedder.for_images(self.settings))

    @property
    def retrieval(self) -> RetrievalStack:
        """The catalog, vector and keyword stores, embedders and hybrid searcher: files under data_dir, or
        Redis when redis_url is set (shared mode, see retrieval/stack.py)."""
        return self._once("retrieval", lambda: self._with_kb_hooks(self._with_image_recall(self.retrieval_factory() if self.retrieval_factory else self._open_retrieval())))

    def find_knowledge_base(self, name_or_id: str, tenant_id: str = "default") -> KnowledgeBase:
        """A knowledge base the tenant can read, by name or id. In embedded mode it reads the catalog
        file alone, without opening the stores and models (seconds), so a command given a wrong name
        says so at once."""
        if self.is_open("retrieval") or self.retrieval_factory is not None or self.settings.redis_url:
            return self.retrieval.knowledge_bases.resolve(name_or_id, Principal.operator_of(tenant_id))
        from ragline.retrieval.catalog import SqliteCatalog
        from ragline.retrieval.knowledge_base import KnowledgeBaseService

        catalog = self._once("catalog_file", lambda: SqliteCatalog(self.settings.data_dir / "catalog.sqlite"))
        return KnowledgeBaseService(catalog, {}, embedding_model="").resolve(name_or_id, Principal.operator_of(tenant_id))

    def _with_kb_hooks(self, stack: RetrievalStack) -> RetrievalStack:
        stack.knowledge_bases.on_delete.append(lambda kb_id: self.wiki.forget(kb_id))  # a deleted base's wiki status goes too
        if self.shared_redis is not None:  # and its images in Redis that no other base shows (files stay: image_store.py)
            stack.knowledge_bases.on_delete.append(lambda kb_id: self._release_images(stack, kb_id))
        return stack

    def _release_images(self, stack: RetrievalStack, kb_id: str) -> None:
        from ragline.ingestion.image_store import release_images

        release_images(self.images.store, [k.id for k in stack.catalog.list_knowledge(kb_id)])

    @property
    def graph_store(self) -> GraphStore:
        """The entity graph: DuckDB under the data directory, or a Bolt server when configured."""
        return self._once("graph_store", self.graph_store_factory or self._open_graph_store)

    @property
    def memory_store(self) -> BaseStore:
        return self._once("memory_store", self.memory_store_factory or self._open_memory_store)

    def _open_retrieval(self) -> RetrievalStack:
        from ragline.retrieval.config import RetrievalConfig
        from ragline.retrieval.stack import RetrievalStack

        return RetrievalStack.build(self.settings.data_dir, self.embedder, RetrievalConfig.from_settings(self.settings))

    def _with_image_recall(self, stack: RetrievalStack) -> RetrievalStack:
        """Image recall when a multimodal model is set, also for a stack a host built itself."""
        if stack.searcher.image_embedder is None:
            stack.searcher.image_embedder = self.image_embedder
        return stack

    def _open_graph_store(self) -> GraphStore:
        from ragline.entities.store import open_graph_store

        return open_graph_store(self.settings)

    def _open_memory_store(self) -> BaseStore:
        from ragline.memory.store import memory_store_kind, open_memory_store

        kind = memory_store_kind(self.settings.memory_store, self.settings.redis_url)
        return open_memory_store(kind, self.settings.data_dir / "memory.sqlite", self.settings.redis_url)

    @property
    def memory(self) -> MemoryService:
        """Long-term memories per tenant and user, ranked with the configured embedder."""
        from ragline.memory.service import MemoryService

        return self._once("memory", lambda: MemoryService(self.memory_store, self.embedder))

    @property
    def ingestion(self) -> IngestionService:
        """Parsing, chunking, embedding and indexing; graph extraction for graph-enabled bases."""
        from ragline.ingestion.service import IngestionService

        # the graph store is opened on first need: a locked or unreachable graph must not stop indexing
        return self._once("ingestion", lambda: IngestionService(self.retrieval, graph_store=lambda: self.graph_store, chat=self.chat(),
                                                                images=self.images, on_change=self._documents_changed))

    @property
    def wiki(self) -> WikiScheduler:
        """Wiki pages of wiki-enabled bases, rebuilt in the background after their documents change."""
        from ragline.ingestion.wiki import WikiBuilder
        from ragline.ingestion.wiki_scheduler import WikiScheduler
        from ragline.ingestion.wiki_status import open_wiki_statuses

        return self._once("wiki", lambda: WikiScheduler(lambda: WikiBuilder(self.retrieval, self.ingestion, self.chat()),
                                                        lambda: self.retrieval.catalog, open_wiki_statuses(self.shared_redis)))

    async def _documents_changed(self, kb: KnowledgeBase, documents: list[Knowledge]) -> None:
        await self.wiki.documents_changed(kb, documents)

    @property
    def images(self) -> ImageIndexer:
        """Document images: stored under data_dir/images (in Redis in shared mode), read by offline OCR,
        captioned by vlm_model when set."""
        from ragline.ingestion.image_chunks import ImageIndexer
        from ragline.ingestion.image_store import open_image_store
        from ragline.models.chat import ChatClient

        settings = self.settings
        vision = ChatClient(settings.vlm_model, settings.vlm_api_base, settings.vlm_api_key, engines=self.local_engines) if settings.vlm_model else None
        return self._once("images", lambda: ImageIndexer(open_image_store(settings.data_dir / "images", self.shared_redis),
                                                         vision=vision, embedder=self.image_embedder))

    @property
    def shared_redis(self) -> redis.Redis | None:
        """A sync client (raw bytes) on the shared Redis for images and wiki status; None in embedded mode."""
        url = self.settings.redis_url
        if not url:
            return None
        from ragline.redis_clients import sync_client

        return self._once("shared_redis", lambda: sync_client(url))

    def redis_async(self, purpose: str, *, decode: bool = True) -> AsyncRedis:
        """An asyncio client on the shared Redis for one purpose ("runs", "limits", "jobs", "events"),
        with a pool of its own: blocking stream reads of one purpose never hold the connections
        another needs. Made on first use, closed with the services; raises without redis_url."""
        url = self.settings.redis_url
        if not url:
            raise ValueError(f"Redis is needed for {purpose} but RAGLINE_REDIS_URL is not set")
        from redis.asyncio import Redis

        from ragline.redis_clients import async_pool

        return self._once(f"redis_async:{purpose}:{decode}", lambda: Redis(connection_pool=async_pool(url, decode_responses=decode)))

    # --- models ---

    @property
    def local_engines(self) -> LocalEngines:
        """The local chat models, loaded and run as these settings say (shared with roots configured alike)."""
        from ragline.models.local_engine import LocalChatConfig, LocalEngines

        return self._once("local_engines", lambda: LocalEngines.for_config(LocalChatConfig.from_settings(self.settings)))

    @property
    def intents(self) -> ExemplarIntents:
        """First-turn intent from embedded exemplars (no generation call)."""
        from ragline.models.intents import ExemplarIntents

        return self._once("intents", lambda: ExemplarIntents(self.embedder))

    def chat(self, model: str | None = None) -> ChatClient:
        """A client for `model`, else the configured chat model. The configured base URL and key
        apply to the configured model only: a per-request model uses its provider's own settings."""
        from ragline.models.chat import ChatClient
        from ragline.models.retry import RetryPolicy

        configured, timeout, retry = self.settings.chat_model, self.settings.chat_timeout_s, RetryPolicy.from_settings(self.settings)
        if model is None or model == configured:
            direct = None if self.settings.chat_direct else False
            return self._once("chat", lambda: ChatClient(configured, self.settings.chat_api_base, self.settings.chat_api_key, timeout, retry,
                                                         direct, engines=self.local_engines))
        if model == self.settings.vlm_model:  # the vision model that reads a question's images
            return ChatClient(model, self.settings.vlm_api_base, self.settings.vlm_api_key, timeout, retry, engines=self.local_engines)
        return ChatClient(model, timeout=timeout, retry=retry, engines=self.local_engines)

    def reranker(self, model: str | None = None) -> Reranker | None:
        """The request's rerank model, else the configured one; None means no reranker (the offline default)."""
        from ragline.models.rerank import Reranker
        from ragline.models.retry import RetryPolicy
        from ragline.retrieval.vision_rerank import VisionReranker, sees_images

        configured = self.settings.rerank_model
        name = model or configured
        if not name:
            return None
        timeout, retry = self.settings.rerank_timeout_s, RetryPolicy.from_settings(self.settings)
        if name == configured:
            reranker = Reranker(name, self.settings.rerank_api_base, self.settings.rerank_api_key, timeout, retry)
        else:
            reranker = Reranker(name, timeout=timeout, retry=retry)
        # a multimodal rerank model sees image hits' pictures (rerank_sees_images speaks for the configured one)
        declared = self.settings.rerank_sees_images if name == configured else None
        return VisionReranker(reranker, self.images.store) if sees_images(name, declared) else reranker

    # --- web and tables ---

    @property
    def web_search(self) -> WebSearch:
        from ragline.web.search import WebSearch

        return self._once("web_search", lambda: WebSearch.from_settings(self.settings))

    def web_fetcher(self) -> WebFetcher:
        """A fetcher for one run (its own connection pool); use as `async with`."""
        from ragline.web.fetch import WebFetcher
        from ragline.web.guard import AddressPolicy

        return WebFetcher(AddressPolicy.from_settings(self.settings))

    @property
    def tabular(self) -> TabularAnalysis:
        from ragline.tabular.analysis import TabularAnalysis

        return self._once("tabular", TabularAnalysis)

    @property
    def mcp(self) -> McpClient:
        """The MCP servers agent-mode assistants may name (settings agent_mcp_servers), their tool
        lists, and MCP OAuth for those marked `oauth` (mcp_client/oauth.py)."""
        from ragline.mcp_client.client import McpClient
        from ragline.mcp_client.oauth import open_oauth_flows

        settings = self.settings
        return self._once("mcp", lambda: McpClient(settings.agent_mcp_servers, oauth=open_oauth_flows(settings, self.redis_async)))

    # --- lifecycle ---

    def uses_litellm(self) -> bool:
        """Whether a configured model is called through litellm (not the local engine nor the direct reader)."""
        from ragline.models.local_engine import PROVIDER
        from ragline.models.openai_stream import serves_directly

        settings = self.settings
        direct_chat = settings.chat_direct and serves_directly(settings.chat_model, settings.chat_api_base)
        remote = [m for m in (settings.embedding_model, settings.rerank_model, settings.vlm_model, settings.image_embedding_model) if m]
        return (not settings.chat_model.startswith(f"{PROVIDER}/") and not direct_chat) or any(
            not model.startswith(f"{PROVIDER}/") for model in remote)

    def start_warm_up(self) -> threading.Thread | None:
        """Import litellm in a thread now when a configured model goes through it: the first import
        takes seconds, and made on the event loop during a turn it would stall every stream of the
        process (long enough for another replica to take a run over)."""
        if not self.uses_litellm():
            return None
        from ragline.models.retry import import_litellm

        thread = threading.Thread(target=import_litellm, name="ragline-import-litellm", daemon=True)
        thread.start()
        return thread

    async def aclose(self) -> None:
        """Close what was opened (the run backend, the memory store's file, the graph store's and
        every Redis client's connections, the chat models' connection pools); stop wiki rebuilds."""
        if "ragline.models.openai_stream" in sys.modules:  # a command that called no model imports none to close
            await sys.modules["ragline.models.openai_stream"].close_sessions()
        wiki = self._lazies.get("wiki")
        if wiki is not None and wiki.opened is not None:
            await wiki.opened.aclose()
        async_clients = [name for name in self._lazies if name.startswith("redis_async:")]
        for name in ("memory_store", "graph_store", "shared_redis", *async_clients):
            lazy = self._lazies.get(name)
            opened = lazy.opened if lazy is not None else None
            closer = getattr(opened, "aclose" if name in async_clients else "close", None)
            if not callable(closer):
                continue
            try:
                result = closer()
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:  # closing is best effort at shutdown
                log.warning("closing the %s failed: %s", name, exc)


def services_in(context: Any) -> Services | None:
    """The services a run's context carries, or None when its host gave none (Studio without a root, a bare test)."""
    services = getattr(getattr(context, "host", None), "services", None)
    return services if isinstance(services, Services) else None


def services_of(runtime: Any) -> Services:
    """The run's services. A host that gave none is a wiring bug, reported as such."""
    services = services_in(getattr(runtime, "context", None))
    if services is None:
        raise ServicesMissingError(
            "this run has no services: hosts pass RunContext(host=RunHost(services=Services.from_settings(...))), "
            "or compile the graph with build_graph(..., services=...)"
        )
    return services
