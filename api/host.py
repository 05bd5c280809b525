"""The HTTP host: what the endpoints share, built once in the app's lifespan on the root `Services`
and kept on `app.state.host`.

The knowledge services (retrieval, ingestion, memory, models) are those of one
`ragline.services.Services`, the same instance every graph run of this process receives in its
RunContext, so the API and the pipeline share one set of stores. They open on first use: a
chat-only service never opens Chroma.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from starlette.requests import Request

from ragline.api.auth import KeyRing
from ragline.ingestion.service import IngestionService
from ragline.retrieval.stack import RetrievalStack
from ragline.service.access import Principal
from ragline.service.assistant_service import AssistantService
from ragline.service.backend import Backend, open_backend, stream_kind
from ragline.service.conversations import ConversationService
from ragline.service.job_service import JobService, open_jobs
from ragline.service.runs import RunManager
from ragline.services import Services
from ragline.settings import Settings


@dataclass
class HttpHost:
    """The HTTP host's view of the root `core`: its keys, and the run manager, sessions, jobs and
    assistants built on the run backend `core` owns."""

    runs: RunManager
    conversations: ConversationService
    keyring: KeyRing
    core: Services
    jobs: JobService  # ingestion jobs: run here (embedded) or by `ragline worker`s (Redis)
    assistants: AssistantService

    @property
    def settings(self) -> Settings:
        return self.core.settings

    @property
    def backend(self) -> Backend:
        """The run backend this host opened on the root (checkpoints, streams, registry, graphs), through the run manager that drives it."""
        return self.runs.backend

    def authenticate(self, request: Request) -> Principal:
        return self.keyring.authenticate(request)

    async def stack(self) -> RetrievalStack:
        """The RetrievalStack (opened in a worker thread the first time: it opens Chroma)."""
        return await asyncio.to_thread(lambda: self.core.retrieval)

    async def ingestion(self) -> IngestionService:
        return await asyncio.to_thread(lambda: self.core.ingestion)


@asynccontextmanager
async def open_host(core: Services) -> AsyncIterator[HttpHost]:
    settings = core.settings
    keyring = KeyRing.from_settings(settings)
    core.start_warm_up()
    try:
        async with open_backend(core) as backend:  # the host's: closed before the root's Redis clients it uses
            runs = RunManager(backend, core)
            await runs.start()
            try:
                shared = backend.redis is not None and stream_kind(settings) == "redis"
                async with open_jobs(core, backend.streams, shared=shared) as jobs:
                    assistants = AssistantService(backend.assistants, core)
                    yield HttpHost(runs, ConversationService(backend, runs), keyring, core, jobs, assistants)
            finally:
                await runs.aclose()
    finally:
        await core.aclose()


def host_of(request: Request) -> HttpHost:
    return request.app.state.host
