"""Wiki routes: the state of a knowledge base's wiki pages, and a rebuild on demand.

Pages are rebuilt in the background after documents change (ingestion/wiki_scheduler.py); these routes show
how the last rebuild went (pages written, failed and why) and start one by hand, e.g. after a
provider outage made pages fail. The status is read in a thread: in shared mode it comes from
Redis through a sync client, which on the event loop would stall every stream of the process.
"""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ragline.api import inputs
from ragline.api.host import host_of
from ragline.api.openapi import doc
from ragline.ingestion.wiki_scheduler import WikiStatus
from ragline.retrieval.knowledge_base import check_writable

TAG = "knowledge"


@doc("The wiki of a knowledge base: pages stored, and how the last rebuild went", TAG, response=WikiStatus, errors=(401, 404))
async def wiki_status(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    stack = await svc.stack()
    kb = await asyncio.to_thread(stack.knowledge_bases.get, inputs.path(request, "kb_id"), who)
    status = await asyncio.to_thread(svc.core.wiki.status, kb.id)
    return JSONResponse(status.model_dump(mode="json"))


@doc("Rebuild the wiki pages of a knowledge base in the background (owning tenant)", TAG, response=WikiStatus, status=202, errors=(401, 404))
async def rebuild_wiki(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    stack = await svc.stack()
    kb = await asyncio.to_thread(stack.knowledge_bases.get, inputs.path(request, "kb_id"), who)
    check_writable(kb, who)
    await svc.core.wiki.schedule(kb.id)
    status = await asyncio.to_thread(svc.core.wiki.status, kb.id)
    return JSONResponse(status.model_dump(mode="json"), status_code=202)
