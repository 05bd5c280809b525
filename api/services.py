"""What the endpoints share, built once in the app's lifespan and kept on `app.state.services`.

The knowledge services (RetrievalStack, ingestion) are those of `ragline.services.Services`, the
same instance every graph run of this process receives in its RunContext, so the API and the
pipeline share one set of stores. They are opened on first use: a chat-only service never opens
Chroma.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request

from ragline.api.auth import KeyRing
from ragline.service.access import Principal
from ragline.service.backend import Backend, open_backend
from ragline.service.conversations import SessionService
from ragline.service.runs import RunManager
from ragline.services import Services as CoreServices
from ragline.settings import Settings

RetrievalFactory = Callable[[], Any]  # () -> RetrievalStack


@dataclass
class AppServices:
    settings: Settings
    backend: Backend
    runs: RunManager
    conversations: SessionService
    keyring: KeyRing
    core: CoreServices
    _ingestion: Any = field(default=None, repr=False)

    def authenticate(self, request: Request, *, allow_query: bool = False) -> Principal:
        return self.keyring.authenticate(request, allow_query=allow_query)

    async def stack(self) -> Any:
        """The RetrievalStack (opened in a worker thread the first time: it opens Chroma)."""
        return await asyncio.to_thread(lambda: self.core.retrieval)

    async def ingestion(self) -> Any:
        if self._ingestion is None:
            from ragline.ingestion.service import IngestionService

            from ragline.entities.store import graph_store_from_settings

            self._ingestion = IngestionService(await self.stack(), graph_store=await asyncio.to_thread(graph_store_from_settings))
        return self._ingestion


@asynccontextmanager
async def open_services(settings: Settings, retrieval_factory: RetrievalFactory | None = None) -> AsyncIterator[AppServices]:
    keyring = KeyRing.from_settings(settings)
    core = CoreServices(retrieval_factory=retrieval_factory)
    async with open_backend(settings) as backend:
        runs = RunManager(backend, core_services=core)
        await runs.start()
        try:
            yield AppServices(settings, backend, runs, SessionService(backend, runs), keyring, core)
        finally:
            await runs.aclose()


def services(request: Request) -> AppServices:
    return request.app.state.services
