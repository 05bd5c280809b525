"""Long-term memory routes: the caller's own memories (tenant and user of the API key).

What is added here is recalled in that caller's later answers (memory_recall), and never in
another user's: memories are kept per tenant and user.
"""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ragline.api import inputs
from ragline.api.errors import NotFound
from ragline.api.host import host_of
from ragline.api.openapi import doc
from ragline.api.schemas import MemoryCreate, MemoryItem, MemoryList
from ragline.memory.service import Caller, Memory, MemoryService

TAG = "memories"


def _item(memory: Memory) -> MemoryItem:
    return MemoryItem(id=memory.id, text=memory.text, created_at=memory.created_at.isoformat())


async def _memories(request: Request) -> tuple[MemoryService, Caller]:
    svc = host_of(request)
    who = svc.authenticate(request)
    memory = await asyncio.to_thread(lambda: svc.core.memory)  # the first use opens the store (file I/O)
    return memory, Caller(who.tenant_id, who.user_id)


@doc("Remember something about the caller", TAG, body=MemoryCreate, response=MemoryItem, status=201)
async def add_memory(request: Request) -> Response:
    memory, caller = await _memories(request)
    body = await inputs.body(request, MemoryCreate)
    added = await memory.add(caller, body.text)
    return JSONResponse(_item(added).model_dump(), status_code=201)


@doc("The caller's memories, newest first", TAG, response=MemoryList)
async def list_memories(request: Request) -> Response:
    memory, caller = await _memories(request)
    items = [_item(m) for m in await memory.list(caller)]
    return JSONResponse(MemoryList(items=items).model_dump())


@doc("Forget one of the caller's memories", TAG, status=204, errors=(401, 404))
async def delete_memory(request: Request) -> Response:
    memory, caller = await _memories(request)
    if not await memory.delete(caller, inputs.path(request, "memory_id")):
        raise NotFound("no such memory")
    return Response(status_code=204)
