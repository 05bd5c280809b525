"""Ragline's assistants as LangGraph assistants of the graphs `langgraph dev` serves, so Studio
lists them and runs a turn with one (issue 28: "Studio shows them as assistants of the graph").

A LangGraph assistant is a named, versioned configuration of one graph: exactly what a Ragline
assistant is. Publishing makes, for each of the tenant's assistants, the LangGraph assistant of the
same id, on `ragline` (pipeline mode) or `ragline_agent` (agent mode), whose run context is the
assistant's (its configuration, tools, tenant, id and version, recorded on every answer). Publishing
again updates those whose version changed (LangGraph keeps its own versions of them) and removes
those deleted here; the graphs' own default assistants are never touched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ragline.service.assistants import Assistant

GRAPH_OF_MODE = {"pipeline": "ragline", "agent": "ragline_agent"}
SEARCH_PAGE = 100


@dataclass(frozen=True)
class Published:
    action: Literal["created", "updated", "unchanged", "removed"]
    assistant_id: str
    name: str
    graph_id: str


def studio_context(assistant: Assistant) -> dict[str, Any]:
    """The run context (contracts/context.py RunContext, as JSON) of a turn with this assistant."""
    return {"tenant_id": assistant.tenant_id, "agent": assistant.config.model_dump(mode="json", exclude_none=True),
            "assistant_id": assistant.id, "assistant_version": assistant.version, **assistant.agent_tools()}


def _metadata(assistant: Assistant) -> dict[str, Any]:
    return {"ragline_tenant": assistant.tenant_id, "ragline_version": assistant.version}


async def _published(client: Any, tenant_id: str) -> dict[str, dict[str, Any]]:
    """The LangGraph assistants published for this tenant, by id."""
    found: dict[str, dict[str, Any]] = {}
    offset = 0
    while True:
        page = await client.assistants.search(metadata={"ragline_tenant": tenant_id}, limit=SEARCH_PAGE, offset=offset)
        found |= {item["assistant_id"]: item for item in page}
        if len(page) < SEARCH_PAGE:
            return found
        offset += SEARCH_PAGE


async def publish(assistants: list[Assistant], tenant_id: str, client: Any) -> list[Published]:
    """Make the LangGraph server's assistants of this tenant match `assistants` (langgraph_sdk's client)."""
    earlier = await _published(client, tenant_id)
    done: list[Published] = []
    for assistant in assistants:
        graph_id = GRAPH_OF_MODE[assistant.mode]
        shape = {"graph_id": graph_id, "context": studio_context(assistant), "metadata": _metadata(assistant),
                 "name": assistant.name, "description": assistant.description or None}
        found = earlier.pop(assistant.id, None)
        if found is None:
            await client.assistants.create(assistant_id=assistant.id, **shape)
            action: Literal["created", "updated", "unchanged"] = "created"
        elif found["metadata"].get("ragline_version") != assistant.version or found["graph_id"] != graph_id:
            await client.assistants.update(assistant.id, **shape)
            action = "updated"
        else:
            action = "unchanged"
        done.append(Published(action, assistant.id, assistant.name, graph_id))
    for gone in earlier.values():
        await client.assistants.delete(gone["assistant_id"])
        done.append(Published("removed", gone["assistant_id"], gone.get("name") or "", gone["graph_id"]))
    return done
