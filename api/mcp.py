"""The MCP door: Ragline's knowledge as four tools of the official MCP SDK (`MCPServer`).

- `list_knowledge_bases`, `search` (the search route's hybrid search and rerank chain), `ask`
  (a whole turn of the pipeline, as knowledge-chat runs it, answered as plain text with its
  references; `assistant_id` runs it with a stored assistant), `read_document` (a document's chunks, paged).
- Transports: streamable HTTP at `/mcp` on `ragline serve` (stateless, so any replica answers any
  request), and stdio (`ragline mcp`, ragline/commands/mcp.py).
- Who calls: on /mcp the request's API key, exactly as on the REST routes (`X-API-Key` or
  `Authorization: Bearer`; a request without a valid key gets a 401 before MCP reads it); over
  stdio the key the command was given, or the dev principal when no key is configured. A tool
  takes the tenant from there, never from its arguments: another tenant's knowledge base,
  document or session is "not found", and a model outside the tenant's allow list is refused.

Thin adapters: the work is `knowledge.hybrid_search`, `knowledge.document_chunks`, and
`service.mcp_tools.answer_turn` over the RunManager.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field, ValidationError
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from ragline import __version__, defaults
from ragline.api import knowledge
from ragline.api.auth import KeyRing, presented_key
from ragline.api.errors import ApiError, Unauthorized, error_body, validation_message
from ragline.api.guards import api_key_of
from ragline.api.host import HttpHost, host_of
from ragline.api.mcp_identity import (
    RESOURCE_METADATA_PATH,
    IssuerUnavailable,
    OAuthIdentity,
    TokenRefused,
    resource_metadata_url,
    resource_url,
)
from ragline.api.schemas import SearchRequest
from ragline.contracts.access import audit
from ragline.contracts.request import PipelineRequest
from ragline.models.embeddings import EmbeddingError
from ragline.retrieval.errors import RetrievalError
from ragline.service.access import Principal, ServiceError
from ragline.service.key_limits import Limiter
from ragline.service.knowledge_access import knowledge_named
from ragline.service.mcp_tools import TurnAnswer, answer_turn

MAX_QUERY_CHARS = 4000  # as the search route's body
MAX_KNOWLEDGE_BASES = 20
MAX_TOP_K = 50
MAX_PAGE = 100  # chunks per read_document page
MAX_ID_CHARS = 200

INSTRUCTIONS = (
    "Ragline answers questions from knowledge bases. list_knowledge_bases shows what you may search; "
    "search returns ranked passages with their chunk, document and knowledge base ids; ask runs the whole "
    "retrieval-augmented pipeline and returns a cited answer with its references; read_document pages "
    "through a document's chunks. Knowledge bases may be named by name or id; ask's assistant_id names an "
    "assistant (a stored configuration) to answer with."
)

Name = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS)]
KnowledgeBaseNames = Annotated[list[Name], Field(max_length=MAX_KNOWLEDGE_BASES, description="Knowledge bases by name or id.")]


# --- what the tools return ---


class KnowledgeBaseInfo(BaseModel):
    id: str
    name: str
    description: str = ""
    type: str
    tags: list[str] = Field(default_factory=list)
    shared: bool = False


class KnowledgeBases(BaseModel):
    knowledge_bases: list[KnowledgeBaseInfo]


class Passage(BaseModel):
    """A search hit with what a citation needs."""

    chunk_id: str
    knowledge_base_id: str
    document_id: str
    title: str
    score: float
    content: str
    chunk_index: int
    chunk_type: str
    match_type: str


class Passages(BaseModel):
    passages: list[Passage]


class DocumentChunk(BaseModel):
    chunk_id: str
    chunk_index: int
    chunk_type: str
    content: str


class DocumentPage(BaseModel):
    document_id: str
    knowledge_base_id: str
    title: str
    total_chunks: int
    offset: int
    next_offset: int | None = Field(description="Pass it as offset for the next page; null after the last one.")
    chunks: list[DocumentChunk]


# --- who calls ---

PRINCIPAL_STATE = "ragline_principal"  # where McpHttp leaves the caller it authenticated, for the tools of that request


@dataclass
class Caller:
    """The services and principal of one tool call, and the per-key answer-stream limit of /mcp."""

    svc: HttpHost
    who: Principal
    limiter: Limiter | None = None
    key: str | None = None  # the digest the limiter counts by

    @asynccontextmanager
    async def answer_slot(self) -> AsyncIterator[None]:
        """An ask counts as one of the key's concurrent answer streams, as a knowledge-chat POST does."""
        if self.limiter is None or self.key is None:
            yield
            return
        lease = await self.limiter.open_stream(self.key)
        if lease is None:
            raise ToolError("this API key already streams as many answers as it may; wait for one to end")
        try:
            yield
        finally:
            await self.limiter.close_stream(self.key, lease)


Locate = Callable[[Context], Caller]


def http_caller(ctx: Context) -> Caller:
    """The caller of a tool call that came over /mcp: the key of its HTTP request."""
    request = ctx.request_context.request
    if not isinstance(request, Request):
        raise ToolError("this tool call carries no HTTP request to authenticate")
    svc = host_of(request)
    who = request.scope.get("state", {}).get(PRINCIPAL_STATE)  # McpHttp decided it, from a key or an OAuth token
    if not isinstance(who, Principal):
        with refusals():
            who = svc.authenticate(request)
    return Caller(svc, who, getattr(request.app.state, "limiter", None), api_key_of(request.scope))


def stdio_principal(keyring: KeyRing, key: str | None) -> Principal:
    """The principal of `ragline mcp`: its key's tenant, or the dev principal when no key is configured."""
    who = keyring.principal_of(key, missing="API keys are configured: give ragline mcp a key (--api-key or RAGLINE_MCP_API_KEY)")
    if not keyring.dev_mode:
        audit(who, "mcp-stdio", "start")
    return who


@contextmanager
def refusals() -> Iterator[None]:
    """The service's refusals as tool errors with the same messages the REST API gives; anything
    else stays an unexpected error, which the SDK reports without its details."""
    try:
        yield
    except ApiError as exc:
        raise ToolError(exc.message) from None
    except ValidationError as exc:
        raise ToolError(validation_message(exc)) from None
    except (ServiceError, RetrievalError, EmbeddingError) as exc:
        raise ToolError(str(exc) or type(exc).__name__) from None


async def _resolve(caller: Caller, names: list[str]) -> list[str]:
    """Knowledge base ids of names or ids the tenant may read (else "does not exist")."""
    stack = await caller.svc.stack()
    return list(dict.fromkeys(stack.knowledge_bases.resolve(name, caller.who).id for name in names))


@contextmanager
def _root_logging_untouched() -> Iterator[None]:
    """MCPServer() calls logging.basicConfig (a rich handler at INFO on the root logger), which would
    turn every library's INFO records into `ragline serve` output. basicConfig does nothing while
    the root logger has a handler, so it gets one for that moment."""
    root = logging.getLogger()
    placeholder = logging.NullHandler()
    root.addHandler(placeholder)
    try:
        yield
    finally:
        root.removeHandler(placeholder)


# --- the tools ---

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def build_server(locate: Locate) -> MCPServer:
    """The MCP server; `locate` says who calls and with which services (HTTP or stdio)."""
    with _root_logging_untouched():
        server: MCPServer = MCPServer("ragline", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")

    @server.tool(annotations=READ_ONLY)
    async def list_knowledge_bases(ctx: Context) -> KnowledgeBases:
        """The knowledge bases you may search: your tenant's and the shared ones."""
        caller = locate(ctx)
        stack = await caller.svc.stack()
        return KnowledgeBases(knowledge_bases=[
            KnowledgeBaseInfo(id=kb.id, name=kb.name, description=kb.description, type=kb.type.value, tags=kb.tags, shared=kb.shared)
            for kb in stack.knowledge_bases.list(caller.who)
        ])

    @server.tool(annotations=READ_ONLY)
    async def search(
        ctx: Context,
        query: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What to look for.")],
        knowledge_bases: Annotated[list[Name], Field(min_length=1, max_length=MAX_KNOWLEDGE_BASES, description="Knowledge bases by name or id.")],
        top_k: Annotated[int, Field(ge=1, le=MAX_TOP_K, description="Passages to return.")] = 8,
        document_ids: Annotated[list[Name], Field(max_length=50, description="Only these documents of the knowledge bases.")] = [],  # noqa: B006 (a schema default, never mutated)
    ) -> Passages:
        """Hybrid search (vector + keyword, fused, then the rerank chain) over knowledge bases; passages with their citation ids."""
        caller = locate(ctx)
        with refusals():
            body = SearchRequest(query=query, knowledge_base_ids=await _resolve(caller, knowledge_bases), knowledge_ids=document_ids,
                                 rerank_top_k=top_k)
            hits = await knowledge.hybrid_search(caller.svc, caller.who, body)
        return Passages(passages=[
            Passage(chunk_id=h.id, knowledge_base_id=h.knowledge_base_id, document_id=h.knowledge_id, title=h.knowledge_title, score=h.score,
                    content=h.content, chunk_index=h.chunk_index, chunk_type=h.chunk_type.value, match_type=h.match_type.value)
            for h in hits[:top_k]  # image hits the rerank chain keeps beyond top_k stay within the asked number here
        ])

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False))
    async def ask(
        ctx: Context,
        question: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="The question.")],
        knowledge_bases: KnowledgeBaseNames = [],  # noqa: B006 (a schema default, never mutated)
        session_id: Annotated[str | None, Field(max_length=MAX_ID_CHARS, description="Continue this conversation (from an earlier answer).")] = None,
        model: Annotated[str | None, Field(max_length=MAX_ID_CHARS, description="A chat model this service allows; unset: its default.")] = None,
        footnotes: Annotated[bool, Field(description="Mark citations in the answer as [n], numbered as the references.")] = True,
        assistant_id: Annotated[str | None, Field(max_length=MAX_ID_CHARS, description="Answer with this assistant's configuration "
                                                  "(its knowledge bases, prompts, models); knowledge_bases and model only where it allows them.")] = None,
    ) -> TurnAnswer:
        """Answer a question with Ragline's whole pipeline (query rewrite, hybrid search, rerank, a cited answer) from
        knowledge bases; returns the answer as plain text and the passages it cites as references."""
        caller = locate(ctx)
        with refusals():
            ids = await _resolve(caller, knowledge_bases)
            own: dict[str, Any] = {"query": question, **({"knowledge_base_ids": ids} if ids else {}), **({"chat_model": model} if model else {})}
            assistant = None
            if assistant_id:
                turn = await caller.svc.assistants.turn(caller.who, assistant_id, own, door="MCP")
                request, assistant = turn.request, turn.assistant
            else:
                request = PipelineRequest(**own)
            kb_ids, knowledge_ids = knowledge_named(request)
            if kb_ids or knowledge_ids:
                await knowledge.authorize_search(await caller.svc.stack(), caller.who, kb_ids, knowledge_ids)
            async with caller.answer_slot():
                return await answer_turn(caller.svc.runs, caller.svc.conversations, caller.who, request, session_id=session_id,
                                         footnotes=footnotes, assistant=assistant)

    @server.tool(annotations=READ_ONLY)
    async def read_document(
        ctx: Context,
        knowledge_base: Annotated[Name, Field(description="The document's knowledge base, by name or id.")],
        document_id: Name,
        offset: Annotated[int, Field(ge=0, le=1_000_000, description="The first chunk to return (0-based).")] = 0,
        limit: Annotated[int, Field(ge=1, le=MAX_PAGE, description="Chunks per page.")] = 20,
    ) -> DocumentPage:
        """A document's chunks in order, one page at a time (document ids come from search results)."""
        caller = locate(ctx)
        with refusals():
            stack = await caller.svc.stack()
            kb = stack.knowledge_bases.resolve(knowledge_base, caller.who)
            chunks = knowledge.document_chunks(stack, kb, document_id, caller.who)
            document = stack.catalog.get_knowledge(document_id)
        page = chunks[offset : offset + limit]
        return DocumentPage(
            document_id=document_id, knowledge_base_id=kb.id, title=document.title if document else "", total_chunks=len(chunks),
            offset=offset, next_offset=offset + limit if offset + limit < len(chunks) else None,
            chunks=[DocumentChunk(chunk_id=c.id, chunk_index=c.chunk_index, chunk_type=c.chunk_type, content=c.content) for c in page],
        )

    return server


# --- /mcp on the HTTP service ---


class McpHttp:
    """The ASGI app at /mcp. Its session manager runs inside the service's lifespan (`running()`)."""

    def __init__(self, identity: OAuthIdentity | None = None) -> None:
        self.identity = identity  # MCP OAuth: access tokens of an authorization server, beside API keys
        self.server = build_server(http_caller)
        # Stateless: no MCP session lives in one process, so replicas behind a balancer need no
        # stickiness. DNS-rebinding checks are the service's own (LoopbackOnly in dev mode); the
        # SDK's would refuse every Host but 127.0.0.1 and localhost.
        self.server.streamable_http_app(stateless_http=True, max_request_body_size=defaults.JSON_BODY_MAX_BYTES,
                                        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
        self.sessions = self.server.session_manager

    def running(self) -> Any:
        return self.sessions.run()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            who = await self._principal(request)
        except Unauthorized as exc:  # before MCP reads the body: a keyless client learns it at once, as on REST
            response = error_body(exc.status, exc.code, exc.message)
            challenge = f', resource_metadata="{resource_metadata_url(request)}"' if self.identity is not None else ""
            response.headers["WWW-Authenticate"] = f'Bearer realm="ragline"{challenge}'
            await response(scope, receive, send)
            return
        except IssuerUnavailable as exc:
            await error_body(503, "issuer_unavailable", f"{exc}; try again later")(scope, receive, send)
            return
        scope.setdefault("state", {})[PRINCIPAL_STATE] = who
        await self.sessions.handle_request(scope, receive, send)

    async def _principal(self, request: Request) -> Principal:
        """An API key's principal; with MCP OAuth, a bearer token that is no key is an access token of
        the issuer (and a request with neither is refused, in dev mode too, with where to sign in)."""
        host = host_of(request)
        if self.identity is None:
            return host.authenticate(request)
        key = presented_key(request.headers, {}, allow_query=False)
        in_key_header = bool(request.headers.get("x-api-key"))  # never sent to the issuer
        if key is None or (in_key_header and host.keyring.dev_mode):
            raise Unauthorized("sign in: an OAuth access token of the authorization server in "
                               f"{RESOURCE_METADATA_PATH}, or an API key (X-API-Key or Authorization: Bearer)")
        if in_key_header or host.keyring.knows(key):
            return host.authenticate(request)
        try:
            who = await self.identity.principal(key, resource_url(request))
        except TokenRefused as exc:
            raise Unauthorized(str(exc)) from exc
        audit(who, "mcp", f"{request.method} /mcp", via="oauth")
        return who
