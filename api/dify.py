"""The Dify door: `POST /retrieval`, Dify's External Knowledge API (service/dify_retrieval.py).

In Dify, an External Knowledge API whose endpoint is this service's root URL and whose API key is
a Ragline key; its External Knowledge ID is a Ragline knowledge base name or id. The key maps to
a tenant exactly as on the REST API (X-API-Key works too; in dev mode no key is needed), the
request rate of the key applies (api/guards.py), and the search is the REST search route's own
(`knowledge.hybrid_search`: hybrid recall, then the rerank chain).

Errors have the specification's shape, `{"error_code": int, "error_msg": str}`: 1001 (a missing
or malformed Authorization header) and 1002 (an unknown key) with HTTP 403, as the
specification's AccessDeniedException (and Dify, which reads a 403 as "Authorization failed");
2001 (no such knowledge base, or one the caller's tenant cannot read: the same answer, so nothing
leaks) with 404; Ragline's 3001 for a bad request (400, or 413/415/422 as on the REST API), and
5001 for a failure of the service (5xx).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ragline.api import inputs, knowledge
from ragline.api.auth import DEV_PRINCIPAL, key_digest
from ragline.api.errors import ApiError, Unauthorized, handle_error
from ragline.api.host import HttpHost, host_of
from ragline.api.openapi import doc
from ragline.api.schemas import SearchRequest
from ragline.contracts.access import audit
from ragline.retrieval.errors import KnowledgeBaseAccessError, KnowledgeBaseNotFoundError
from ragline.retrieval.types import KnowledgeBase
from ragline.service.access import Principal
from ragline.service.dify_retrieval import (
    MAX_SCOPED_DOCUMENTS,
    MetadataConditionError,
    RetrievalError,
    RetrievalRequest,
    RetrievalResponse,
    compile_filter,
    record,
    search_pool,
)

TAG = "dify"
INVALID_AUTHORIZATION = 1001
AUTHORIZATION_FAILED = 1002
KNOWLEDGE_NOT_FOUND = 2001
INVALID_REQUEST = 3001  # Ragline's own: the specification leaves codes beyond its three to the service
SERVICE_FAILED = 5001


class DifyError(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def dify_error(status: int, code: int, message: str) -> JSONResponse:
    return JSONResponse({"error_code": code, "error_msg": message}, status_code=status)


def caller(svc: HttpHost, request: Request) -> Principal:
    """The key's tenant; the specification's 1001 and 1002 instead of the REST API's 401."""
    if svc.keyring.dev_mode:
        return DEV_PRINCIPAL
    key = request.headers.get("x-api-key", "").strip()
    if not key:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise DifyError(403, INVALID_AUTHORIZATION, "Invalid Authorization header format. Expected 'Bearer <api-key>' format.")
        key = token.strip()
    try:
        who = svc.keyring.principal_of(key, missing="", headers=request.headers)
    except Unauthorized as refused:  # unknown or expired: the specification's 1002 (with why, for an expired key)
        why = "" if svc.keyring.by_digest.get(key_digest(key)) is None else f" ({refused.message})"
        raise DifyError(403, AUTHORIZATION_FAILED, f"Authorization failed. Please check your API key.{why}") from None
    audit(who, "dify", f"{request.method} {request.url.path}")
    return who


def knowledge_base(stack: Any, name_or_id: str, who: Principal) -> KnowledgeBase:
    try:
        return stack.knowledge_bases.resolve(name_or_id.strip(), who)
    except (KnowledgeBaseNotFoundError, KnowledgeBaseAccessError):  # another tenant's base reads as missing
        raise DifyError(404, KNOWLEDGE_NOT_FOUND, "The knowledge does not exist") from None


async def _records(svc: HttpHost, who: Principal, body: RetrievalRequest) -> RetrievalResponse:
    try:
        keep = compile_filter(body.metadata_condition)
    except MetadataConditionError as exc:
        raise DifyError(400, INVALID_REQUEST, f"metadata_condition: {exc}") from None
    stack = await svc.stack()
    kb = knowledge_base(stack, body.knowledge_id, who)
    setting = body.retrieval_setting
    allowed: set[str] | None = None  # document ids the filter keeps (None: no filter)
    scope: list[str] = []
    if keep is not None:
        documents = await asyncio.to_thread(stack.catalog.list_knowledge, kb.id)
        kept = keep.documents(documents)
        if not kept:
            return RetrievalResponse(records=[])
        if len(kept) < len(documents):
            allowed = {d.id for d in kept}
            scope = sorted(allowed) if len(allowed) <= MAX_SCOPED_DOCUMENTS else []
    search = SearchRequest(query=body.query, knowledge_base_ids=[kb.id], knowledge_ids=scope,
                           rerank_top_k=search_pool(setting.top_k, post_filtered=allowed is not None and not scope))
    hits = await knowledge.hybrid_search(svc, who, search)
    hits = [h for h in hits if (allowed is None or h.knowledge_id in allowed) and h.score >= setting.score_threshold]
    hits = sorted(hits, key=lambda h: h.score, reverse=True)[: setting.top_k]
    documents_by_id = stack.catalog.get_knowledge_many([h.knowledge_id for h in hits]) if hits else {}
    return RetrievalResponse(records=[record(h, documents_by_id.get(h.knowledge_id)) for h in hits])


@doc("Dify External Knowledge API: passages of a knowledge base for Dify (Authorization: Bearer <Ragline API key>; "
     "knowledge_id is a knowledge base name or id). Errors are {error_code, error_msg}: 1001 and 1002 (403), 2001 (404), "
     "3001 (a bad request)", TAG, body=RetrievalRequest, response=RetrievalResponse, errors=(400, 403, 404, 413, 415, 422),
     error=RetrievalError)
async def retrieval(request: Request) -> Response:
    try:
        svc = host_of(request)
        who = caller(svc, request)
        body = await inputs.body(request, RetrievalRequest)
        return JSONResponse((await _records(svc, who, body)).model_dump(mode="json"))
    except DifyError as exc:
        return dify_error(exc.status, exc.code, exc.message)
    except ApiError as exc:
        return dify_error(exc.status, INVALID_REQUEST, exc.message)
    except Exception as exc:  # the REST API's mapping (status and message), in Dify's shape
        answer = await handle_error(request, exc)
        message = json.loads(bytes(answer.body))["error"]["message"]
        code = SERVICE_FAILED if answer.status_code >= 500 else INVALID_REQUEST
        return dify_error(answer.status_code, code, message)
