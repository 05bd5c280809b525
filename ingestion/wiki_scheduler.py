"""The wiki in the background: pages are rebuilt after documents change, never on an answer's path.

Ingestion calls `documents_changed` after it stored or deleted documents; that only starts a
task. One rebuild per knowledge base runs at a time (a change during it reruns it once after,
so pages are never written twice over and none is duplicated), and at most
`WIKI_BUILD_CONCURRENCY` pages are written at once across all bases (the chat model is shared
with the answers). A failure is logged at error level and kept in the base's status
(`GET /api/v1/knowledge-bases/{id}/wiki`, `ragline kb wiki NAME`); the next change retries.
With a shared Redis that status lives there (ingestion/wiki_status.py): a replica answers for a
rebuild a worker runs. So does the lock that serializes a base's rebuilds across processes
(ingestion/wiki_lock.py): a process asked to rebuild while another holds it waits until a rebuild
that started after its request finished, there or here, so no change goes without its pages.
Deleting a base (`forget`) deletes its status and lock too. Those Redis calls block (a sync client),
so the scheduler makes them in a thread (`_call`): on the event loop each would stall every answer
streaming in the process. A rebuild writes a page only while it still holds the lock (`_fence`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from ragline import defaults
from ragline.ingestion.wiki import Fence, WikiBuilder, WikiReport, is_wiki_document
from ragline.ingestion.wiki_lock import WikiLockLost
from ragline.ingestion.wiki_status import LocalWikiStatuses, WikiState, WikiStatus, WikiStatuses
from ragline.retrieval.catalog import Catalog
from ragline.retrieval.types import Knowledge, KnowledgeBase, utcnow

__all__ = ["WikiScheduler", "WikiState", "WikiStatus"]

log = logging.getLogger(__name__)
T = TypeVar("T")


class WikiScheduler:
    """Background rebuilds per knowledge base, bounded, serialized per base, with a status."""

    def __init__(self, builder: Callable[[], WikiBuilder], catalog: Callable[[], Catalog],
                 statuses: WikiStatuses | None = None) -> None:
        self._builder_factory = builder  # opened on the first rebuild: a status read needs only the catalog
        self._catalog = catalog
        self._builder: WikiBuilder | None = None
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._wanted: dict[str, int] = {}  # per base, the number of this process's last request (see wiki_lock.py)
        self._statuses = statuses or LocalWikiStatuses()  # Redis in shared mode: any replica reads any rebuild
        self._locks = self._statuses.locks()
        self._limits: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}

    @property
    def builder(self) -> WikiBuilder:
        if self._builder is None:
            self._builder = self._builder_factory()
        return self._builder

    async def documents_changed(self, kb: KnowledgeBase, documents: list[Knowledge]) -> None:
        """The ingestion hook: schedule a rebuild unless only wiki pages changed (the wiki's own writes)."""
        if documents and all(is_wiki_document(d) for d in documents):
            return
        # a base without the wiki has no pages (turning it off removed them): no catalog scan on every ingestion
        if kb.wiki_enabled:
            await self.schedule(kb.id)

    async def schedule(self, kb_id: str) -> None:
        """Start a background rebuild, or have the running one run again after it finishes. Returns once
        the base is marked building: a status read right after, on any replica, sees it."""
        wanted = await self._call(self._locks.request, kb_id)
        self._wanted[kb_id] = max(wanted, self._wanted.get(kb_id, 0))  # two calls' replies may come back in either order
        if kb_id in self._tasks:
            return
        token = await self._call(self._statuses.start, kb_id)
        if kb_id in self._tasks:  # another call started the task while this one marked: this mark is spare
            await self._call(self._statuses.stop, kb_id, token)
            return
        self._tasks[kb_id] = asyncio.get_running_loop().create_task(self._run(kb_id, token), name=f"wiki:{kb_id}")

    async def rebuild(self, kb_id: str) -> WikiStatus:
        """Rebuild now and wait for it (the CLI); a running background rebuild finishes first."""
        await self.schedule(kb_id)
        await self.drain()
        return await self._call(self.status, kb_id)

    async def drain(self) -> None:
        """Wait until no rebuild runs (a process about to exit lets its pages finish)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)

    async def aclose(self) -> None:
        """Stop running rebuilds: a page half-generated is simply not written (the next change redoes it)."""
        loop = asyncio.get_running_loop()
        mine = [task for task in self._tasks.values() if task.get_loop() is loop]  # another loop's tasks ended with it
        for task in mine:
            task.cancel()
        await asyncio.gather(*mine, return_exceptions=True)

    def forget(self, kb_id: str) -> None:
        """The base was deleted: its status and lock go (a rebuild running now stops recording)."""
        self._statuses.forget(kb_id)
        self._locks.forget(kb_id)

    def status(self, kb_id: str) -> WikiStatus:
        """Blocks in shared mode (Redis, the catalog): async code calls it in a thread."""
        kb = self._catalog().get_kb(kb_id)
        last = self._statuses.last(kb_id) or WikiStatus(knowledge_base_id=kb_id, enabled=False)
        state: WikiState = "building" if kb_id in self._tasks or self._statuses.building(kb_id) else last.state
        return last.model_copy(update={"enabled": bool(kb and kb.wiki_enabled), "state": state, "pages": self._page_count(kb_id)})

    async def _run(self, kb_id: str, token: str) -> None:
        keeper = asyncio.create_task(self._statuses.keep(kb_id, token), name=f"wiki-mark:{kb_id}")
        try:
            while True:
                requested, done = await self._call(self._locks.progress, kb_id)
                # served by a rebuild that started after it (here or in another process), or the base was deleted;
                # no await between this check and leaving _tasks: a schedule() meanwhile finds this task and reruns it
                if done >= self._wanted[kb_id] or requested < self._wanted[kb_id]:
                    return
                lock = await self._call(self._locks.acquire, kb_id)
                if lock is None:  # another process rebuilds: it may serve this request, or die and free the lock
                    await asyncio.sleep(self._locks.poll_s)
                    continue
                await self._rebuild_locked(kb_id, lock)
        finally:
            keeper.cancel()
            self._tasks.pop(kb_id, None)
            self._wanted.pop(kb_id, None)
            try:
                await self._call(self._statuses.stop, kb_id, token)
            except Exception as exc:  # the mark expires on its own; the rebuild's outcome is what matters
                log.warning("could not clear the wiki rebuild mark of %s: %s", kb_id, exc)

    async def _rebuild_locked(self, kb_id: str, lock: str) -> None:
        """One rebuild while the lock is held and renewed. A holder that lost its lock (it expired,
        or the base was deleted) records nothing: the process that took the lock over rebuilds."""
        covered, _ = await self._call(self._locks.progress, kb_id)  # read before the documents: these requests are served
        holder = asyncio.create_task(self._locks.hold(kb_id, lock), name=f"wiki-lock:{kb_id}")
        job = asyncio.create_task(self._rebuild_once(kb_id, self._fence(kb_id, lock)), name=f"wiki-rebuild:{kb_id}")
        try:
            await asyncio.wait({job, holder}, return_when=asyncio.FIRST_COMPLETED)
            if not job.done() or not await self._call(self._locks.finish, kb_id, lock, covered):
                log.warning("the wiki rebuild of %s lost its lock (expired, or the base was deleted): not recorded", kb_id)
                return
            await self._call(self._statuses.record, job.result())
            if (await self._call(self._locks.progress, kb_id))[0] < covered:  # the base was deleted between the finish and the record
                await self._call(self.forget, kb_id)
        finally:
            job.cancel()
            holder.cancel()
            await asyncio.gather(job, holder, return_exceptions=True)
            try:
                await self._call(self._locks.release, kb_id, lock)
            except Exception as exc:  # the lock expires on its own
                log.warning("could not release the wiki rebuild lock of %s: %s", kb_id, exc)

    def _fence(self, kb_id: str, lock: str) -> Fence:
        """The check before each page write: `hold` notices a lost lock only at its next renewal (up to a
        third of the TTL later), and meanwhile this rebuild must not overwrite the new holder's pages."""
        async def still_held() -> None:
            if not await self._call(self._locks.held, kb_id, lock):
                raise WikiLockLost(f"the wiki rebuild of {kb_id} lost its lock: page not written")
        return still_held

    async def _call(self, call: Callable[..., T], *args: Any) -> T:
        """A status or lock call: in a thread when it goes to Redis (a sync client, which on the event
        loop would stall every stream of the process), else here (embedded mode: dicts, no waiting)."""
        if self._statuses.blocking:
            return await asyncio.to_thread(call, *args)
        return call(*args)

    async def _rebuild_once(self, kb_id: str, fence: Fence) -> WikiStatus:
        base = WikiStatus(knowledge_base_id=kb_id, enabled=True, finished_at=None)
        try:
            report: WikiReport = await self.builder.rebuild(kb_id, self._limit(), fence)
        except (asyncio.CancelledError, WikiLockLost):  # a lost lock is the caller's to report (and not recorded)
            raise
        except Exception as exc:  # the embedder or the catalog failed before any page: nothing changed
            log.error("the wiki of knowledge base %s was not rebuilt: %s", kb_id, exc)
            return base.model_copy(update={"state": "failed", "error": str(exc) or type(exc).__name__, "finished_at": utcnow()})
        state: WikiState = "failed" if report.failed else "ok"
        return base.model_copy(update={"state": state, "written": report.written, "unchanged": report.unchanged,
                                       "removed": report.removed, "failed": report.failed, "finished_at": utcnow()})

    def _limit(self) -> asyncio.Semaphore:
        """One semaphore per event loop (the CLI runs a loop per command; a semaphore binds to one)."""
        loop = asyncio.get_running_loop()
        if loop not in self._limits:
            self._limits = {loop: asyncio.Semaphore(defaults.WIKI_BUILD_CONCURRENCY)}
        return self._limits[loop]

    def _page_count(self, kb_id: str) -> int:
        return sum(1 for d in self._catalog().list_knowledge(kb_id) if is_wiki_document(d))
