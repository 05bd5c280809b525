"""Message routes: load (paged), delete one, clear all, fork and rewind at a message; search the
tenant's indexed conversations."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ragline.api import inputs
from ragline.api.host import host_of
from ragline.api.openapi import doc
from ragline.api.schemas import MessagePage, MessageRef, MessageSearchPage, MessageSearchQuery, MessagesQuery, Rewound
from ragline.service.sessions import Session

TAG = "messages"
OWNER_ERRORS = (401, 403, 404, 409)


@doc("Load messages, newest page first (before_id pages back); oldest first within a page", TAG, query=MessagesQuery, response=MessagePage)
async def list_messages(request: Request) -> Response:
    """An answer still being generated is included, unfinished (is_completed=false), with the
    text streamed so far: follow it with continue-stream."""
    svc = host_of(request)
    who = svc.authenticate(request)
    query = inputs.query(request, MessagesQuery)
    items, has_more = await svc.conversations.messages(who, inputs.path(request, "session_id"), before_id=query.before_id, limit=query.limit)
    return JSONResponse(MessagePage(items=items, has_more=has_more).model_dump(mode="json"))


@doc("Delete one message (owner only)", TAG, status=204, errors=OWNER_ERRORS)
async def delete_message(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    await svc.conversations.delete_message(who, inputs.path(request, "session_id"), inputs.path(request, "message_id"))
    return Response(status_code=204)


@doc("Clear the session's messages (owner only)", TAG, status=204, errors=OWNER_ERRORS)
async def clear_messages(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    await svc.conversations.clear_messages(who, inputs.path(request, "session_id"))
    return Response(status_code=204)


@doc("Fork: a new session with this conversation up to a message", TAG, body=MessageRef, response=Session, status=201)
async def fork(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    body = await inputs.body(request, MessageRef)
    session = await svc.conversations.fork(who, inputs.path(request, "session_id"), body.message_id)
    return JSONResponse(session.model_dump(mode="json"), status_code=201)


@doc("Rewind: drop every message after a message (owner only)", TAG, body=MessageRef, response=Rewound, errors=(400, *OWNER_ERRORS, 422))
async def rewind(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    body = await inputs.body(request, MessageRef)
    removed = await svc.conversations.rewind(who, inputs.path(request, "session_id"), body.message_id)
    return JSONResponse(Rewound(removed=removed).model_dump())


@doc("Search the tenant's past conversations (turns indexed into chat-history knowledge bases)", TAG, query=MessageSearchQuery, response=MessageSearchPage)
async def search_messages(request: Request) -> Response:
    """Seed: SearchMessages. Only turns indexed with chat_history_index (or the server's
    RAGLINE_CHAT_HISTORY_INDEX) are searchable; each hit is one question/answer turn. With a rerank
    model configured (RAGLINE_RERANK_MODEL) the hits go through the pipeline's rerank chain first."""
    svc = host_of(request)
    who = svc.authenticate(request)
    query = inputs.query(request, MessageSearchQuery)
    await svc.stack()  # opens Chroma in a worker thread the first time, not on the event loop
    items, total = await svc.runs.after_turn.chat_history.search(
        who, query.q, mode=query.mode, offset=(query.page - 1) * query.page_size, limit=query.page_size
    )
    page = MessageSearchPage(items=items, total=total, page=query.page, page_size=query.page_size)
    return JSONResponse(page.model_dump(mode="json"))
