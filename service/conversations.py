"""Sessions and their messages (seed: session.go, message.go, session_fork.go, session_rewind.go).

Every method takes the caller and checks access first: the tenant to read, the owner to change
or delete. Messages are read from the session's thread; the assistant message of a running turn
is shown too, unfinished, with the text streamed so far.
"""

from __future__ import annotations

import builtins
import contextlib
import logging
from typing import Any

from langchain_core.messages import AnyMessage, HumanMessage
from pydantic import BaseModel, Field

from ragline.citations import references_payload
from ragline.citations.messages import message_text
from ragline.contracts import thread_messages
from ragline.generation.citing import source_chunks
from ragline.service import threads
from ragline.service.access import (
    ConflictError,
    InvalidRequestError,
    NotFoundError,
    Principal,
    check_owned,
    check_readable,
)
from ragline.service.backend import Backend
from ragline.service.registry import RunRecord
from ragline.service.replay import Transcript
from ragline.service.runs import RunManager
from ragline.service.sessions import LastRequestState, Session, utcnow
from ragline.service.titles import generate_title

log = logging.getLogger(__name__)
CLEAR_PAGE = 100  # sessions listed, and deleted, at a time when a user clears them all


class MessageImage(BaseModel):
    """An image attached to a question (seed: types.Image): its URL and what it shows."""

    url: str
    caption: str = Field("", description="The image's description: the client's, or the one query understanding wrote.")


def message_images(message: AnyMessage) -> builtins.list[MessageImage]:
    """A question's images (thread_messages reads the older shape too: a bare URL per image)."""
    return [MessageImage(url=str(i.get("url") or ""), caption=str(i.get("caption") or "")) for i in thread_messages.images_of(message)]


class Message(BaseModel):
    """One message of a session, as clients see it (seed: types.Message)."""

    id: str
    session_id: str
    request_id: str = ""
    role: str = Field(description="user or assistant")
    content: str = ""
    knowledge_references: builtins.list[dict[str, Any]] = Field(default_factory=list)
    images: builtins.list[MessageImage] = Field(default_factory=list)
    is_completed: bool = True
    stopped: bool = False
    truncated: bool = False
    assistant_id: str | None = Field(None, description="The assistant (service/assistants.py) an answer's turn ran with.")
    assistant_version: int | None = Field(None, description="Which version of that assistant.")


def shown_references(stored: Any) -> builtins.list[dict[str, Any]]:
    """A stored answer's references as its `references` event sent them (chunk_id, title, ...).

    An answer keeps the merged search results themselves (id, knowledge_title, ...): the next
    turn's history merge reads them back as search results. A client must see them as the live
    stream showed them, or its citations (`<kb chunk_id=...>`) find no reference and no title.
    A stopped answer kept the event's entries, which pass as they are."""
    items = [item for item in stored if isinstance(item, dict)] if isinstance(stored, builtins.list) else []
    return [item if "chunk_id" in item or "id" not in item else references_payload(source_chunks([item]))[0] for item in items]


def message_view(message: AnyMessage, session_id: str) -> Message:
    assistant_id, assistant_version = thread_messages.assistant_of(message)
    return Message(
        id=message.id or "",
        session_id=session_id,
        request_id=thread_messages.request_id_of(message),
        role="user" if isinstance(message, HumanMessage) else "assistant",
        content=message_text(message),
        knowledge_references=shown_references(thread_messages.references_of(message)),
        images=message_images(message),
        stopped=thread_messages.is_stopped(message),
        truncated=thread_messages.is_truncated(message),
        assistant_id=assistant_id,
        assistant_version=assistant_version,
    )


class ConversationService:
    def __init__(self, backend: Backend, runs: RunManager) -> None:
        self.backend = backend
        self.runs = runs
        self.graph = backend.graph

    # --- sessions ---

    async def create(self, who: Principal, *, title: str = "", description: str = "") -> Session:
        session = Session(tenant_id=who.tenant_id, owner_id=who.user_id, title=title, description=description)
        await self.backend.sessions.save(session)
        return session

    async def readable(self, who: Principal, session_id: str) -> Session:
        session = await self.backend.sessions.get(session_id)
        check_readable(session, who)
        assert session is not None
        return session

    async def owned(self, who: Principal, session_id: str) -> Session:
        session = await self.backend.sessions.get(session_id)
        check_owned(session, who)
        assert session is not None
        return session

    async def list(self, who: Principal, page: int, page_size: int) -> tuple[builtins.list[Session], int]:
        return await self.backend.sessions.list(who.tenant_id, (page - 1) * page_size, page_size)

    async def update(self, who: Principal, session_id: str, changes: dict[str, Any]) -> Session:
        await self.owned(who, session_id)
        allowed = {k: v for k, v in changes.items() if k in ("title", "description", "pinned", "last_request_state")}
        if "last_request_state" in allowed:  # patch() copies without validating: hand it the model
            allowed["last_request_state"] = LastRequestState.model_validate(allowed["last_request_state"])
        session = await self.backend.sessions.patch(session_id, {**allowed, "updated_at": utcnow()})
        if session is None:
            raise NotFoundError("session not found")
        return session

    async def delete(self, who: Principal, session_ids: builtins.list[str]) -> builtins.list[str]:
        """Delete sessions the caller owns; all or nothing (one foreign id refuses the batch)."""
        sessions = [await self.owned(who, session_id) for session_id in dict.fromkeys(session_ids)]
        for session in sessions:
            running = await self.backend.registry.running_in(session.id)
            if running is not None:
                await self.runs.stop(running)
        await self.backend.sessions.delete(sessions)
        for session in sessions:
            await self.backend.checkpointer.adelete_thread(session.id)
            await self._forget_indexed(who.tenant_id, session.id)
        return [session.id for session in sessions]

    async def clear(self, who: Principal) -> builtins.list[str]:
        """Delete every session the caller owns (the tenant's other users' stay), as `delete` does one
        batch: a running answer is stopped, the thread and its indexed turns go too."""
        mine: builtins.list[str] = []
        offset = 0
        while True:
            page, total = await self.backend.sessions.list(who.tenant_id, offset, CLEAR_PAGE)
            mine += [session.id for session in page if session.owner_id == who.user_id]
            offset += len(page)
            if not page or offset >= total:
                break
        deleted: builtins.list[str] = []
        for start in range(0, len(mine), CLEAR_PAGE):
            batch = mine[start : start + CLEAR_PAGE]
            try:
                deleted += await self.delete(who, batch)
            except NotFoundError:  # one went meanwhile (another tab deleted it): the rest one by one
                for session_id in batch:
                    with contextlib.suppress(NotFoundError):
                        deleted += await self.delete(who, [session_id])
        return deleted

    async def _forget_indexed(self, tenant_id: str, session_id: str) -> None:
        """A deleted conversation stops answering questions: its indexed turns go too. No
        retrieval stack open means nothing was indexed by this process (and any other replica's
        turns stay until the next delete there)."""
        if not self.runs.services.is_open("retrieval"):
            return
        try:
            await self.runs.after_turn.chat_history.forget_session(tenant_id, session_id)
        except Exception:
            log.warning("removing the indexed turns of session %s failed", session_id, exc_info=True)

    async def generate_title(self, who: Principal, session_id: str, query: str | None = None) -> Session:
        session = await self.owned(who, session_id)
        if not query:
            first = next((m for m in await threads.messages_of(self.graph, session_id) if isinstance(m, HumanMessage)), None)
            if first is None:
                raise InvalidRequestError("the session has no question to title yet; send one in the body")
            query = message_text(first)
        title = await generate_title(query, self.runs.services.chat())
        updated = await self.backend.sessions.patch(session.id, {"title": title, "updated_at": utcnow()})
        return updated or session

    # --- messages ---

    async def messages(self, who: Principal, session_id: str, *, before_id: str | None, limit: int) -> tuple[builtins.list[Message], bool]:
        """Up to `limit` messages before `before_id` (the newest when none), oldest first."""
        await self.readable(who, session_id)
        views = [message_view(m, session_id) for m in await threads.messages_of(self.graph, session_id)]
        running = await self.backend.registry.running_in(session_id)
        if running is not None and all(v.id != running.assistant_message_id for v in views):
            views.append(await self._running_view(running))
        if before_id is not None:
            index = next((i for i, v in enumerate(views) if v.id == before_id), None)
            if index is None:
                raise NotFoundError("message not found")
            views = views[:index]
        return views[-limit:], len(views) > limit

    async def _running_view(self, running: RunRecord) -> Message:
        entries = await self.backend.streams.read(running.session_id, running.assistant_message_id)
        shown = Transcript.of([entry.event for entry in entries])
        return Message(
            id=running.assistant_message_id,
            session_id=running.session_id,
            request_id=running.request_id,
            role="assistant",
            content=shown.answer,
            knowledge_references=shown.references,
            is_completed=False,
            assistant_id=running.assistant_id or None,
            assistant_version=running.assistant_version or None,
        )

    async def _at_rest(self, session_id: str) -> None:
        if await self.backend.registry.running_in(session_id) is not None:
            raise ConflictError("a reply is being generated in this session; stop it first")

    async def delete_message(self, who: Principal, session_id: str, message_id: str) -> None:
        await self.owned(who, session_id)
        await self._at_rest(session_id)
        if all(m.id != message_id for m in await threads.messages_of(self.graph, session_id)):
            raise NotFoundError("message not found")
        await threads.remove_messages(self.graph, session_id, [message_id])

    async def clear_messages(self, who: Principal, session_id: str) -> None:
        await self.owned(who, session_id)
        await self._at_rest(session_id)
        await threads.clear_messages(self.graph, session_id)

    # --- fork and rewind (checkpoint history) ---

    async def _conversation_until(self, session_id: str, message_id: str) -> builtins.list[AnyMessage]:
        current = await threads.messages_of(self.graph, session_id)
        ids = [m.id for m in current]
        if message_id not in ids:
            raise NotFoundError("message not found")
        return current[: ids.index(message_id) + 1]

    async def fork(self, who: Principal, session_id: str, message_id: str) -> Session:
        """A new session owned by the caller whose conversation is this one up to `message_id`."""
        source = await self.readable(who, session_id)
        messages = await self._conversation_until(session_id, message_id)
        fork = Session(
            tenant_id=who.tenant_id,
            owner_id=who.user_id,
            title=source.title,
            description=source.description,
            parent_session_id=source.id,
            forked_from_message_id=message_id,
        )
        await self.backend.sessions.save(fork)
        await threads.edit_messages(self.graph, fork.id, messages)
        return fork

    async def rewind(self, who: Principal, session_id: str, message_id: str) -> builtins.list[str]:
        """Drop every message after `message_id`; the thread's head goes back to the checkpoint
        that ended with it (messages deleted since stay deleted). Returns the dropped ids."""
        await self.owned(who, session_id)
        await self._at_rest(session_id)
        kept = await self._conversation_until(session_id, message_id)
        current = await threads.messages_of(self.graph, session_id)
        dropped = [m.id for m in current[len(kept) :] if m.id]
        if not dropped:
            return []
        earlier = await threads.find_snapshot(self.graph, session_id, message_id)
        if earlier is None:
            await threads.remove_messages(self.graph, session_id, dropped)
            return dropped
        await threads.restore(self.graph, session_id, earlier)
        kept_ids = {m.id for m in kept}
        resurrected = [m.id for m in earlier.values.get("messages", []) if m.id and m.id not in kept_ids]
        await threads.remove_messages(self.graph, session_id, resurrected)
        return dropped
