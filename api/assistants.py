"""Assistant routes: create, list (paged), get (a version), update (a new version), delete.

A turn names an assistant with `assistant_id` in its body (api/chat.py); the rules live in
service/assistant_service.py. Another tenant's assistant is not found (404), never forbidden.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ragline.api import inputs
from ragline.api.host import host_of
from ragline.api.openapi import doc
from ragline.api.schemas import AssistantCreateIn, AssistantPage, AssistantQuery, AssistantUpdateIn, Deleted, PageQuery
from ragline.service.assistants import Assistant

TAG = "assistants"


def _json(model: object, status: int = 200) -> JSONResponse:
    return JSONResponse(model.model_dump(mode="json"), status_code=status)  # type: ignore[attr-defined]


@doc("Create an assistant: a stored configuration turns name by id", TAG, body=AssistantCreateIn, response=Assistant, status=201)
async def create_assistant(request: Request) -> Response:
    """The models it names must be allowed for the tenant (else 400), its knowledge bases and
    documents readable by the tenant (else 404); unknown fields, settings or tools are a 422."""
    svc = host_of(request)
    who = svc.authenticate(request)
    body = await inputs.body(request, AssistantCreateIn)
    return _json(await svc.assistants.create(who, body), 201)


@doc("List the tenant's assistants (latest versions), most recently changed first", TAG, query=PageQuery, response=AssistantPage)
async def list_assistants(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    query = inputs.query(request, PageQuery)
    items, total = await svc.assistants.list(who, query.page, query.page_size)
    return _json(AssistantPage(items=items, total=total, page=query.page, page_size=query.page_size))


@doc("Get an assistant: its latest version, or the one named by ?version=", TAG, query=AssistantQuery, response=Assistant)
async def get_assistant(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    query = inputs.query(request, AssistantQuery)
    return _json(await svc.assistants.get(who, inputs.path(request, "assistant_id"), query.version))


@doc("Update an assistant: its next version (the earlier ones stay readable)", TAG, body=AssistantUpdateIn, response=Assistant)
async def update_assistant(request: Request) -> Response:
    """Fields left out stay; in `config`, each setting given replaces the stored one and a null
    clears it. Turns started afterwards run with the new version."""
    svc = host_of(request)
    who = svc.authenticate(request)
    body = await inputs.body(request, AssistantUpdateIn)
    return _json(await svc.assistants.update(who, inputs.path(request, "assistant_id"), body))


@doc("Delete an assistant with all its versions; turns naming it are then refused (404)", TAG, response=Deleted, errors=(401, 404))
async def delete_assistant(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    assistant_id = inputs.path(request, "assistant_id")
    await svc.assistants.delete(who, assistant_id)
    return _json(Deleted(deleted=[assistant_id]))
