"""Health and the OpenAPI document (both public)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ragline.api.openapi import doc, openapi_document
from ragline.api.schemas import Health
from ragline.api.services import services


@doc("Liveness and the configured backends", "service", response=Health, public=True, errors=())
async def health(request: Request) -> Response:
    svc = services(request)
    body = Health(
        status="ok",
        backend=svc.backend.describe(),
        runs=svc.runs.local_runs(),
        auth="dev (no API keys configured)" if svc.keyring.dev_mode else "api keys",
    )
    return JSONResponse(body.model_dump())


@doc("This OpenAPI document", "service", public=True, errors=())
async def openapi(request: Request) -> Response:
    from ragline import __version__

    document = getattr(request.app.state, "openapi", None)
    if document is None:
        document = openapi_document(request.app.routes, title="Ragline", version=__version__)
        request.app.state.openapi = document
    return JSONResponse(document)
