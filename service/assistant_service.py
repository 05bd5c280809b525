"""Assistants for a caller: create, read, list, update (a new version), delete, and the request
of a turn that names one (issue 28). Every door (HTTP, the CLI, the OpenAI-compatible API, MCP)
goes through here, so each applies the same rules:

- a model an assistant names must be on the server's allow list for the tenant (service/models.py);
- the knowledge bases and documents it names must be readable by the tenant;
- a turn naming an assistant runs with the assistant's latest version as its agent configuration,
  and may set only the settings the assistant lists as overridable (the question itself always);
- a turn naming an assistant in agent mode runs agent mode's graph (graph/agent.py) with the tools
  the assistant allows, and is refused (422) when its chat model cannot call tools (the local model).
"""

from __future__ import annotations

import asyncio
import builtins
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ragline.contracts.request import PER_QUESTION_FIELDS, AgentConfig, PipelineRequest, effective_request
from ragline.mcp_client.client import McpServerError
from ragline.mcp_client.oauth import AuthorizationRequired, McpUser
from ragline.models.chat import LOCAL_TOOLS_REFUSAL, ChatClient
from ragline.service.access import NotFoundError, Principal, UnprocessableError
from ragline.service.assistants import (
    SETTINGS,
    ApprovalTools,
    Assistant,
    AssistantMode,
    AssistantStore,
    Description,
    McpServers,
    Name,
    Overridable,
    Tools,
    approval_within_tools,
)
from ragline.service.knowledge_access import authorize_knowledge, knowledge_named
from ragline.service.models import check_models
from ragline.services import Services
from ragline.settings import Settings


class AssistantCreate(BaseModel):
    """A new assistant; unknown fields are refused."""

    model_config = ConfigDict(extra="forbid")

    name: Name
    description: Description = ""
    mode: AssistantMode = Field("pipeline", description="pipeline (the seed's RAG graph) or agent (a tool-calling loop; needs a chat model with tool calling).")
    config: AgentConfig = Field(default_factory=AgentConfig, description="Defaults of every request setting for the turns that name it.")
    overridable: Overridable = Field(default_factory=lambda: list(SETTINGS), description="Settings a turn may set itself (default: all).")
    tools: Tools = Field(default_factory=list)
    approval_tools: ApprovalTools = Field(default_factory=list)
    mcp_servers: McpServers = Field(default_factory=list)

    @model_validator(mode="after")
    def _approval_within_tools(self) -> AssistantCreate:
        approval_within_tools(self.tools, self.approval_tools, self.mcp_servers)
        return self


class AssistantUpdate(BaseModel):
    """Changes making the assistant's next version; a field left out (or null) stays as it was."""

    model_config = ConfigDict(extra="forbid")

    name: Name | None = None
    description: Description | None = None
    mode: AssistantMode | None = None
    config: AgentConfig | None = Field(None, description="Settings to change: each one given replaces the stored one, null clears it; the others stay.")
    overridable: Overridable | None = None
    tools: Tools | None = None
    approval_tools: ApprovalTools | None = None
    mcp_servers: McpServers | None = None


@dataclass(frozen=True)
class AssistantTurn:
    request: PipelineRequest  # the assistant's configuration overlaid with what the turn set itself
    assistant: Assistant  # the version the turn runs with


def merged_config(stored: AgentConfig, changes: AgentConfig) -> AgentConfig:
    """`stored` with each setting `changes` names replaced (a null clearing it)."""
    kept = stored.model_dump(exclude_none=True)
    given = {name: getattr(changes, name) for name in changes.model_fields_set}
    merged = {name: value for name, value in {**kept, **given}.items() if value is not None}
    return AgentConfig.model_validate(merged)


def revision(update: AssistantUpdate) -> Any:
    """The function making the next version of an assistant from its latest one."""

    def revise(latest: Assistant) -> Assistant:
        changes: dict[str, Any] = update.model_dump(exclude_none=True, exclude={"config"})
        if update.config is not None:
            changes["config"] = merged_config(latest.config, update.config)
        return latest.model_copy(update=changes)

    return revise


def check_agent_model(request: PipelineRequest, settings: Settings) -> None:
    """UnprocessableError when the turn's chat model (the request's, else the configured default)
    cannot call tools: agent mode is refused before it starts instead of ending in an error."""
    model = request.chat_model or settings.chat_model
    if not ChatClient(model).supports_tools:
        raise UnprocessableError(LOCAL_TOOLS_REFUSAL.format(model=model))


def refused_settings(assistant: Assistant, own: dict[str, Any]) -> builtins.list[str]:
    """The settings a turn sets that the assistant does not let it set."""
    allowed = {*assistant.overridable, *PER_QUESTION_FIELDS}  # a turn's own question, whatever the assistant allows
    return [name for name in own if name not in allowed]


class AssistantService:
    def __init__(self, store: AssistantStore, services: Services) -> None:
        self.store = store
        self.services = services

    async def create(self, who: Principal, body: AssistantCreate) -> Assistant:
        assistant = Assistant(tenant_id=who.tenant_id, **body.model_dump(exclude={"config"}), config=body.config)
        await self._check(who, assistant)
        await self.store.create(assistant)
        return assistant

    async def get(self, who: Principal, assistant_id: str, version: int | None = None) -> Assistant:
        assistant = await self.store.get(who.tenant_id, assistant_id, version)
        if assistant is None:
            exists = version is not None and await self.store.get(who.tenant_id, assistant_id) is not None
            raise NotFoundError(f"assistant {assistant_id} has no version {version}" if exists else f"assistant {assistant_id} not found")
        return assistant

    async def list(self, who: Principal, page: int, page_size: int) -> tuple[builtins.list[Assistant], int]:
        return await self.store.list(who.tenant_id, (page - 1) * page_size, page_size)

    async def update(self, who: Principal, assistant_id: str, body: AssistantUpdate) -> Assistant:
        revise = revision(body)
        await self._check(who, revise(await self.get(who, assistant_id)))
        updated = await self.store.update(who.tenant_id, assistant_id, revise)
        if updated is None:  # deleted meanwhile
            raise NotFoundError(f"assistant {assistant_id} not found")
        return updated

    async def delete(self, who: Principal, assistant_id: str) -> None:
        if not await self.store.delete(who.tenant_id, assistant_id):
            raise NotFoundError(f"assistant {assistant_id} not found")

    async def turn(self, who: Principal, assistant_id: str, own: dict[str, Any], *, door: str | None = None) -> AssistantTurn:
        """The request of a turn naming the assistant: its latest version's configuration, then the
        settings the turn sets itself (each of which the assistant must allow). ValidationError on
        a bad setting, as for a turn without an assistant."""
        assistant = await self.get(who, assistant_id)
        prepared = self.prepared(assistant, own, door=door)
        if door is not None:
            await self.authorized_at_door(who, assistant, door)
        return prepared

    async def authorized_at_door(self, who: Principal, assistant: Assistant, door: str) -> None:
        """A door that cannot show a link refuses an agent-mode assistant whose MCP server still
        needs the caller's authorization (MCP OAuth): the error carries the link to open first."""
        mcp = self.services.mcp
        if assistant.mode != "agent" or mcp.oauth is None:
            return
        user = McpUser(who.tenant_id, who.user_id)
        for server in (name for name in assistant.mcp_servers if mcp.needs_user(name)):
            if await mcp.oauth.authorized(server, user):
                continue
            try:
                await mcp.tools(server, user)
            except AuthorizationRequired as needed:
                raise UnprocessableError(f"assistant {assistant.name!r} uses the MCP server {server}, which needs your authorization "
                                         f"first, and {door} cannot ask for it: open {needed.url} and allow access, then ask again") from None
            except McpServerError:
                continue  # unreachable: the turn leaves its tools out, as through the chat API

    @staticmethod
    def prepared(assistant: Assistant, own: dict[str, Any], *, door: str | None = None) -> AssistantTurn:
        """The turn's request with this version of an assistant (a door that read it already). A
        `door` that cannot carry a decision refuses an assistant whose tool calls wait for one:
        its run would only wait, then deny."""
        if door is not None and assistant.mode == "agent" and assistant.approval_tools:
            tools = ", ".join(assistant.approval_tools)
            raise UnprocessableError(f"assistant {assistant.name!r} asks its user to approve each call to {tools}, which {door} cannot "
                                     "ask; use it through the chat API (POST /api/v1/sessions/{id}/knowledge-chat, then .../approvals)")
        refused = refused_settings(assistant, own)
        if refused:
            allowed = ", ".join(assistant.overridable) or "none"
            raise UnprocessableError(f"{refused[0]} is set by assistant {assistant.name!r} and a turn may not override it (it allows: {allowed})")
        return AssistantTurn(effective_request(own, assistant.config), assistant)

    async def _check(self, who: Principal, assistant: Assistant) -> None:
        """The models on the tenant's allow list, the knowledge readable by the tenant, the MCP
        servers configured for it."""
        config = assistant.config
        mcp = self.services.mcp
        unknown = [name for name in assistant.mcp_servers if not mcp.allowed(name, who.tenant_id)]
        if unknown:
            offered = ", ".join(name for name in mcp.servers if mcp.allowed(name, who.tenant_id)) or "none"
            raise UnprocessableError(f"mcp_servers names {unknown[0]!r}, which is not an MCP server this service allows for the tenant "
                                     f"(settings agent_mcp_servers; allowed: {offered})")
        check_models(config, self.services.settings, who.tenant_id)
        kb_ids, knowledge_ids = knowledge_named(config)
        if kb_ids or knowledge_ids:
            await asyncio.to_thread(lambda: authorize_knowledge(self.services.retrieval, who, kb_ids, knowledge_ids))
