"""The Starlette app: every route of the service in one list, one error handler, one lifespan.

`create_app()` reads settings (env prefix RAGLINE_) unless given them; `ragline serve` runs it
under uvicorn. Paths live under /api/v1; /health and the OpenAPI document need no key.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Route

from ragline.api import (
    assistants,
    chat,
    dify,
    health,
    images,
    jobs,
    knowledge,
    mcp_oauth,
    memories,
    messages,
    metrics,
    openai_compat,
    page,
    sessions,
    wiki,
)
from ragline.api.auth import KeyRing
from ragline.api.errors import HANDLED, ErrorResponses, handle_error
from ragline.api.guards import KeyLimits, LoopbackOnly, RequestIds, RequestLimits, is_loopback_host
from ragline.api.host import open_host
from ragline.api.mcp_identity import RESOURCE_METADATA_PATH, OAuthIdentity, resource_metadata
from ragline.graph import tracing
from ragline.mcp_client.oauth import CALLBACK_PATH
from ragline.service.key_limits import open_limiter
from ragline.services import Services
from ragline.settings import Settings, get_settings

V1 = "/api/v1"
S = f"{V1}/sessions/{{session_id}}"
KB = f"{V1}/knowledge-bases/{{kb_id}}"
DOC = f"{KB}/documents/{{document_id}}"
A = f"{V1}/assistants/{{assistant_id}}"

ROUTES = [
    Route("/health", health.health, methods=["GET"]),
    Route(f"{V1}/health", health.health, methods=["GET"], name="health_v1"),
    Route(f"{V1}/openapi.json", health.openapi, methods=["GET"]),
    Route("/metrics", metrics.metrics, methods=["GET"]),
    # sessions
    Route(f"{V1}/sessions", sessions.create_session, methods=["POST"]),
    Route(f"{V1}/sessions", sessions.list_sessions, methods=["GET"]),
    Route(f"{V1}/sessions/batch-delete", sessions.delete_sessions, methods=["POST"]),
    Route(f"{V1}/sessions/clear", sessions.clear_sessions, methods=["POST"]),
    Route(f"{V1}/sessions/continue-stream/{{session_id}}", chat.continue_stream, methods=["GET"], name="continue_stream_seed"),  # the seed's path
    Route(S, sessions.get_session, methods=["GET"]),
    Route(S, sessions.update_session, methods=["PATCH"]),
    Route(S, sessions.delete_session, methods=["DELETE"]),
    Route(f"{S}/title", sessions.generate_title, methods=["POST"]),
    # assistants: stored configurations a turn names by id
    Route(f"{V1}/assistants", assistants.create_assistant, methods=["POST"]),
    Route(f"{V1}/assistants", assistants.list_assistants, methods=["GET"]),
    Route(A, assistants.get_assistant, methods=["GET"]),
    Route(A, assistants.update_assistant, methods=["PATCH"]),
    Route(A, assistants.delete_assistant, methods=["DELETE"]),
    Route(CALLBACK_PATH, mcp_oauth.callback, methods=["GET"]),  # the browser's return from an MCP server's authorization
    # answers
    Route(f"{S}/knowledge-chat", chat.knowledge_chat, methods=["POST"]),
    Route(f"{S}/chat", chat.chat, methods=["POST"]),
    Route(f"{S}/continue-stream", chat.continue_stream, methods=["GET"]),
    Route(f"{S}/stop", chat.stop, methods=["POST"]),
    Route(f"{S}/inject", chat.inject, methods=["POST"]),
    Route(f"{S}/approvals", chat.approvals, methods=["GET"]),
    Route(f"{S}/approvals", chat.approve, methods=["POST"]),
    # messages
    Route(f"{V1}/messages/search", messages.search_messages, methods=["GET"]),
    Route(f"{S}/messages", messages.list_messages, methods=["GET"]),
    Route(f"{S}/messages", messages.clear_messages, methods=["DELETE"]),
    Route(f"{S}/messages/{{message_id}}", messages.delete_message, methods=["DELETE"]),
    Route(f"{S}/fork", messages.fork, methods=["POST"]),
    Route(f"{S}/rewind", messages.rewind, methods=["POST"]),
    # knowledge bases, documents, FAQ, search
    Route(f"{V1}/knowledge-bases", knowledge.list_knowledge_bases, methods=["GET"]),
    Route(f"{V1}/knowledge-bases", knowledge.create_knowledge_base, methods=["POST"]),
    Route(f"{V1}/knowledge-bases/search", knowledge.search, methods=["POST"]),
    Route(KB, knowledge.get_knowledge_base, methods=["GET"]),
    Route(KB, knowledge.update_knowledge_base, methods=["PATCH"]),
    Route(KB, knowledge.delete_knowledge_base, methods=["DELETE"]),
    Route(f"{KB}/access", knowledge.set_knowledge_base_access, methods=["PUT"]),
    Route(f"{KB}/documents", knowledge.list_documents, methods=["GET"]),
    Route(f"{KB}/documents", knowledge.upload_document, methods=["POST"]),
    Route(f"{KB}/documents/text", knowledge.add_text_document, methods=["POST"]),
    Route(DOC, knowledge.delete_document, methods=["DELETE"]),
    Route(f"{DOC}/reparse", knowledge.reparse_document, methods=["POST"]),
    Route(f"{DOC}/access", knowledge.set_document_access, methods=["PUT"]),
    Route(f"{DOC}/chunks", knowledge.list_chunks, methods=["GET"]),
    Route(f"{DOC}/text", knowledge.document_text, methods=["GET"]),  # what references' offsets point into
    Route(f"{KB}/faq", knowledge.list_faq, methods=["GET"]),
    Route(f"{KB}/faq", knowledge.upsert_faq, methods=["POST"]),
    Route(f"{KB}/faq/import", knowledge.import_faq, methods=["POST"]),
    Route(f"{KB}/jobs/{{job_id}}", jobs.get_job, methods=["GET"]),  # uploads and text documents are ingestion jobs
    Route(f"{KB}/jobs/{{job_id}}", jobs.cancel_job, methods=["DELETE"]),
    Route(f"{KB}/jobs/{{job_id}}/cancel", jobs.cancel_job, methods=["POST"]),
    Route(f"{KB}/jobs/{{job_id}}/events", jobs.job_events, methods=["GET"]),
    Route(f"{KB}/wiki", wiki.wiki_status, methods=["GET"]),
    Route(f"{KB}/wiki/rebuild", wiki.rebuild_wiki, methods=["POST"]),
    Route(f"{V1}/images/{{name}}", images.get_image, methods=["GET"]),  # stored images that answers cite
    # long-term memories of the caller
    Route(f"{V1}/memories", memories.list_memories, methods=["GET"]),
    Route(f"{V1}/memories", memories.add_memory, methods=["POST"]),
    Route(f"{V1}/memories/{{memory_id}}", memories.delete_memory, methods=["DELETE"]),
    # the OpenAI-compatible door (api/openai_compat.py): the pipeline and each knowledge base as models
    Route("/v1/models", openai_compat.list_models, methods=["GET"]),
    Route("/v1/models/{model:path}", openai_compat.get_model, methods=["GET"]),
    Route("/v1/chat/completions", openai_compat.chat_completions, methods=["POST"]),
    # the Dify door (api/dify.py): Dify's External Knowledge API, its endpoint being this service's root URL
    Route("/retrieval", dify.retrieval, methods=["POST"]),
    # the web chat page (api/static/)
    Route("/", page.index, methods=["GET"]),
    Route("/static/{path:path}", page.asset, methods=["GET"]),
]


def create_app(settings: Settings | None = None, *, services: Services | None = None, loopback_only: bool | None = None) -> Starlette:
    """The service; `services` (the composition root) is built from settings unless given, and then
    its settings are the service's.

    `loopback_only` (default: dev mode on a loopback address) refuses foreign Host and Origin headers.
    """
    if services is not None and settings is not None and settings != services.settings:
        raise ValueError("create_app: give settings or services built from them, not both with different settings")
    core = services or Services.from_settings(settings or get_settings())
    settings = core.settings
    if loopback_only is None:
        loopback_only = KeyRing.from_settings(settings).dev_mode and is_loopback_host(settings.host)
    limiter = open_limiter(core)  # counted in Redis when replicas share one
    measured = metrics.Metrics()
    measured.registry.register(metrics.LimitsUncounted(limiter))
    middleware = [
        Middleware(RequestIds),
        Middleware(metrics.MeasureRequests, metrics=measured),
        Middleware(RequestLimits),
        Middleware(KeyLimits, limiter=limiter),
        *([Middleware(LoopbackOnly)] if loopback_only else []),
        Middleware(ErrorResponses),  # innermost: a route's error is answered here, the connection kept
    ]

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # spans per stage when OTEL_EXPORTER_OTLP_ENDPOINT or Langfuse keys are set (a host that enabled tracing keeps its own)
        traced_here = not tracing.enabled() and tracing.configure_from_env()
        try:
            async with open_host(core) as shared, mcp_door.running():  # /mcp's session manager
                app.state.host = shared
                try:
                    yield
                finally:
                    await limiter.aclose()  # before the root closes the limiter's Redis client
        finally:
            if traced_here:
                tracing.shutdown()  # flush the last batch of spans

    from ragline.api.mcp import McpHttp

    identity = OAuthIdentity.from_settings(core.settings)  # MCP OAuth at /mcp (api/mcp_identity.py), when an issuer is configured
    mcp_door = McpHttp(identity)  # the MCP tools over streamable HTTP (api/mcp.py)
    advertised = [Route(RESOURCE_METADATA_PATH, resource_metadata, methods=["GET"])] if identity else []
    app = Starlette(
        routes=[*ROUTES, *advertised, Route("/mcp", mcp_door, name="mcp")],
        middleware=middleware,
        exception_handlers={kind: handle_error for kind in HANDLED},
        lifespan=lifespan,
    )
    app.state.metrics = measured
    app.state.limiter = limiter  # the MCP door's ask counts as an answer stream of its key
    return app
