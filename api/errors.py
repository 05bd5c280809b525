"""Errors as explicit exceptions, turned into JSON responses by one handler.

Every refusal has the same shape: `{"error": {"code": "...", "message": "..."}}`. Bad input is a
4xx with a message a person can act on; a 500 means a bug, and its details stay in the log.
"""

from __future__ import annotations

import logging

from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ragline import plain_errors
from ragline.models.embeddings import EmbeddingError
from ragline.redis_clients import out_of_memory, unreachable
from ragline.retrieval import errors as retrieval_errors
from ragline.service.access import (
    ConflictError,
    ForbiddenError,
    InvalidRequestError,
    NotFoundError,
    ServiceError,
    UnprocessableError,
)

log = logging.getLogger(__name__)


class ApiError(Exception):
    status = 400
    code = "bad_request"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Unauthorized(ApiError):
    status, code = 401, "unauthorized"


class NotFound(ApiError):
    status, code = 404, "not_found"


class Unprocessable(ApiError):
    status, code = 422, "invalid_request"


class PayloadTooLarge(ApiError):
    status, code = 413, "payload_too_large"


class ClientGone(ApiError):
    """The client closed the connection while its request was being worked on (nginx's 499)."""

    status, code = 499, "client_closed_request"


class UnsupportedMediaType(ApiError):
    status, code = 415, "unsupported_media_type"


def validation_message(exc: ValidationError) -> str:
    return plain_errors.validation_message(exc)


_SERVICE_STATUS: list[tuple[type[Exception], int, str]] = [
    (NotFoundError, 404, "not_found"),
    (ForbiddenError, 403, "forbidden"),
    (ConflictError, 409, "conflict"),
    (UnprocessableError, 422, "invalid_request"),
    (InvalidRequestError, 400, "bad_request"),
    # another tenant's knowledge base is "not found": its existence must not leak
    (retrieval_errors.KnowledgeBaseNotFoundError, 404, "not_found"),
    (retrieval_errors.KnowledgeBaseAccessError, 404, "not_found"),
    (retrieval_errors.ReadOnlyKeyError, 403, "forbidden"),
    (retrieval_errors.KnowledgeBaseExistsError, 409, "conflict"),
    (retrieval_errors.EmbeddingModelMismatchError, 400, "bad_request"),
    (retrieval_errors.DocumentTooLargeError, 413, "payload_too_large"),
    (retrieval_errors.IngestionError, 400, "bad_request"),
    (retrieval_errors.StoreGroupError, 503, "unavailable"),
    (retrieval_errors.RetrievalError, 400, "bad_request"),
    (EmbeddingError, 503, "unavailable"),
]


def error_body(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


STORE_FULL = ("the service's store (Redis) is full (maxmemory reached), so nothing was written; "
              "an operator must free memory or raise maxmemory")


async def handle_error(request: Request, exc: Exception) -> JSONResponse:
    """The one exception handler of the app."""
    if isinstance(exc, ApiError):
        return error_body(exc.status, exc.code, exc.message)
    if isinstance(exc, HTTPException):
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return error_body(exc.status_code, code, str(exc.detail))
    if isinstance(exc, ValidationError):
        return error_body(422, "invalid_request", validation_message(exc))
    if out_of_memory(exc):  # before the store errors that may wrap it: the cause is the full store, not the request
        log.warning("Redis refused a write at maxmemory on %s %s", request.method, request.url.path)
        return error_body(507, "insufficient_storage", STORE_FULL)
    if unreachable(exc):  # also when a store wraps it: the shared store is away, try again later
        log.warning("Redis does not answer on %s %s: %s", request.method, request.url.path, exc)
        return error_body(503, "unavailable", "the service's store (Redis) does not answer; try again shortly")
    for kind, status, code in _SERVICE_STATUS:
        if isinstance(exc, kind):
            return error_body(status, code, str(exc) or code)
    if isinstance(exc, ServiceError):
        return error_body(400, "bad_request", str(exc))
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_body(500, "internal", "internal server error")


HANDLED: tuple[type[Exception], ...] = (ApiError, HTTPException, ValidationError, ServiceError, retrieval_errors.RetrievalError, EmbeddingError, Exception)


class ErrorResponses:
    """Every exception a route raises before its response starts becomes `handle_error`'s answer,
    here, inside the app.

    Starlette hands an `Exception` handler's errors to its outermost middleware, which sends the
    answer and then raises again: the server logs a traceback and drops the kept-alive connection,
    so a client's next request after a 507 or a 503 was reset. Only a bug's 500 is logged with its
    traceback (by `handle_error`). Once a response has started, the error is the server's to end.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except Exception as exc:
            if started:
                raise
            response = await handle_error(Request(scope, receive), exc)
            await response(scope, receive, send)
