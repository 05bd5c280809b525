"""Session routes: create, list (paged, pinned first), get, update (title, pin), delete, title."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ragline.api import inputs
from ragline.api.host import host_of
from ragline.api.openapi import doc
from ragline.api.schemas import (
    BatchDelete,
    ClearSessions,
    Deleted,
    PageQuery,
    SessionCreate,
    SessionPage,
    SessionUpdate,
    TitleRequest,
    page_of,
)
from ragline.service.sessions import Session

TAG = "sessions"


def _json(model: object, status: int = 200) -> JSONResponse:
    return JSONResponse(model.model_dump(mode="json"), status_code=status)  # type: ignore[attr-defined]


@doc("Create a session", TAG, body=SessionCreate, response=Session, status=201)
async def create_session(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    body = await inputs.body(request, SessionCreate, optional=True)
    session = await svc.conversations.create(who, title=body.title, description=body.description)
    return _json(session, 201)


@doc("List the tenant's sessions, pinned first, newest next", TAG, query=PageQuery, response=SessionPage)
async def list_sessions(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    query = inputs.query(request, PageQuery)
    items, total = await svc.conversations.list(who, query.page, query.page_size)
    return _json(page_of(items, total, query))


@doc("Get a session", TAG, response=Session)
async def get_session(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    return _json(await svc.conversations.readable(who, inputs.path(request, "session_id")))


@doc("Update a session's title, description or pin (owner only)", TAG, body=SessionUpdate, response=Session, errors=(400, 401, 403, 404, 422))
async def update_session(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    body = await inputs.body(request, SessionUpdate)
    changes = body.model_dump(exclude_none=True)
    return _json(await svc.conversations.update(who, inputs.path(request, "session_id"), changes))


@doc("Delete a session and its conversation (owner only)", TAG, response=Deleted, errors=(401, 403, 404))
async def delete_session(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    deleted = await svc.conversations.delete(who, [inputs.path(request, "session_id")])
    return _json(Deleted(deleted=deleted))


@doc("Delete several sessions; refused whole if any is not the caller's", TAG, body=BatchDelete, response=Deleted, errors=(400, 401, 403, 404, 422))
async def delete_sessions(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    body = await inputs.body(request, BatchDelete)
    return _json(Deleted(deleted=await svc.conversations.delete(who, body.ids)))


@doc("Delete every session of the caller (the tenant's other users keep theirs); the body confirms it", TAG, body=ClearSessions,
     response=Deleted, errors=(400, 401, 422))
async def clear_sessions(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    await inputs.body(request, ClearSessions)
    return _json(Deleted(deleted=await svc.conversations.clear(who)))


@doc("Generate the session's title now (from its first question, or the one given)", TAG, body=TitleRequest, response=Session, errors=(400, 401, 403, 404, 422))
async def generate_title(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    body = await inputs.body(request, TitleRequest, optional=True)
    return _json(await svc.conversations.generate_title(who, inputs.path(request, "session_id"), body.query))
