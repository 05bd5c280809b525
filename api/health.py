"""Health and the OpenAPI document (both public)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ragline import defaults
from ragline.api.host import host_of
from ragline.api.openapi import doc, openapi_document
from ragline.api.schemas import Health


class StoreFull(Exception):
    """Redis is at maxmemory and evicts nothing: every write fails until memory is freed."""


async def _room_in(redis: Any) -> None:
    info = await redis.info("memory")
    limit, used = int(info.get("maxmemory") or 0), int(info.get("used_memory") or 0)
    if limit and info.get("maxmemory_policy") == "noeviction" and used >= limit * defaults.REDIS_FULL_SHARE:
        raise StoreFull(f"used {used / 2**20:.1f} of its maxmemory {limit / 2**20:.1f} MiB (noeviction): writes are refused")


async def _check(name: str, probe: Callable[[], Awaitable[object]]) -> tuple[str, str]:
    try:
        await asyncio.wait_for(probe(), defaults.HEALTH_CHECK_TIMEOUT_S)
    except Exception as exc:  # whatever the store says, /health reports it instead of failing
        return name, f"down: {type(exc).__name__}: {exc}"[:200]
    return name, "ok"


@doc("Liveness, and whether the stores the service needs answer (503 when one does not)", "service", response=Health, public=True, errors=(503,))
async def health(request: Request) -> Response:
    svc = host_of(request)
    probes: list[tuple[str, Callable[[], Awaitable[object]]]] = []
    if svc.backend.redis is not None:
        redis = svc.backend.redis
        probes.append(("redis", redis.ping))
        probes.append(("redis_memory", lambda: _room_in(redis)))
    probes.append(("checkpoints", lambda: svc.backend.checkpointer.aget_tuple({"configurable": {"thread_id": "health-check"}})))
    if svc.core.is_open("retrieval"):  # a probe never opens the stores itself: the first question does
        catalog = svc.core.retrieval.catalog
        probes.append(("catalog", lambda: asyncio.to_thread(catalog.get_kb, "health-check")))
    checks = dict(await asyncio.gather(*(_check(name, probe) for name, probe in probes)))
    healthy = all(answer == "ok" for answer in checks.values())
    body = Health(
        status="ok" if healthy else "unavailable",
        backend=svc.backend.describe(),
        checks=checks,
        runs=svc.runs.local_runs(),
        auth="dev (no API keys configured)" if svc.keyring.dev_mode else "api keys",
    )
    return JSONResponse(body.model_dump(), status_code=200 if healthy else 503)


@doc("This OpenAPI document", "service", public=True, errors=())
async def openapi(request: Request) -> Response:
    from ragline import __version__

    document = getattr(request.app.state, "openapi", None)
    if document is None:
        document = openapi_document(request.app.routes, title="Ragline", version=__version__)
        request.app.state.openapi = document
    return JSONResponse(document)
