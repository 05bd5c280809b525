"""Which Ragline session an OpenAI-style request continues.

OpenAI's protocol has no conversation id: a client sends the whole conversation every time. So:

- explicit: `X-Ragline-Session: <id>` (or `ragline.session_id`) continues that session of the
  caller; its stored history is the conversation, and the request's earlier messages are not read.
- implicit: the conversation is known by its earlier messages. After each answer the door files
  the conversation as the client will send it back (its messages, then this answer exactly as it
  was sent) under a digest of (tenant, user, model, those messages); the next request whose
  earlier messages have that digest continues the same session.
- a conversation the index does not know (a client that edited a message, a conversation begun
  with another model, an index lost with a restart) gets a new session seeded with the request's
  earlier messages: the history always reaches the turn, the index only keeps it in one session.

The index is Redis (30 days) when sessions live there, so every replica finds the session, and
a bounded map in this process otherwise.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol

from langchain_core.messages import AnyMessage

from ragline.contracts import thread_messages
from ragline.service import threads
from ragline.service.access import ForbiddenError, NotFoundError, Principal
from ragline.service.conversations import ConversationService
from ragline.service.sessions import Session

Turn = tuple[str, str]  # (role: "user" or "assistant", text)

INDEX_TTL_S = 30 * 24 * 3600
MEMORY_INDEX_MAX = 20_000
SEED_MESSAGES_MAX = 100  # the history replays at most 100 rounds; older messages would never be read
TITLE_CHARS = 60  # a session begun here is titled by its first question (no title model call)


class ConversationIndex(Protocol):
    async def get(self, key: str) -> str | None: ...

    async def put(self, key: str, session_id: str) -> None: ...


class MemoryIndex:
    """The newest MEMORY_INDEX_MAX conversations of this process."""

    def __init__(self, limit: int = MEMORY_INDEX_MAX) -> None:
        self.limit = limit
        self._items: OrderedDict[str, str] = OrderedDict()

    async def get(self, key: str) -> str | None:
        return self._items.get(key)

    async def put(self, key: str, session_id: str) -> None:
        self._items[key] = session_id
        self._items.move_to_end(key)
        while len(self._items) > self.limit:
            self._items.popitem(last=False)


class RedisIndex:
    def __init__(self, redis: Any, *, prefix: str = "ragline") -> None:
        self.redis = redis
        self.prefix = prefix

    def _key(self, key: str) -> str:
        return f"{self.prefix}:openai:conversation:{key}"

    async def get(self, key: str) -> str | None:
        value = await self.redis.get(self._key(key))
        return value.decode() if isinstance(value, bytes) else value

    async def put(self, key: str, session_id: str) -> None:
        await self.redis.set(self._key(key), session_id, ex=INDEX_TTL_S)


def conversation_key(who: Principal, model: str, turns: Sequence[Turn]) -> str:
    """The digest a conversation is filed under; whitespace runs do not matter (clients trim)."""
    canonical = [[role, " ".join(text.split())] for role, text in turns]
    raw = json.dumps([who.tenant_id, who.user_id, model, canonical], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(raw.encode()).hexdigest()


def title_of(question: str) -> str:
    line = " ".join(question.split())
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1].rstrip() + "…"


class DoorSessions:
    """Sessions for the OpenAI door: find the conversation's session, or open one with its history."""

    def __init__(self, conversations: ConversationService, index: ConversationIndex) -> None:
        self.conversations = conversations
        self.index = index

    async def session_for(self, who: Principal, model: str, earlier: Sequence[Turn], question: str,
                          explicit_id: str | None = None) -> Session:
        """NotFoundError / ForbiddenError for another's explicit session."""
        if explicit_id:
            return await self.conversations.owned(who, explicit_id)
        if earlier:
            found = await self._known(who, await self.index.get(conversation_key(who, model, earlier)))
            if found is not None:
                return found
        session = await self.conversations.create(who, title=title_of(earlier[0][1] if earlier else question))
        if earlier:
            await threads.edit_messages(self.conversations.graph, session.id, seed_messages(earlier))
        return session

    async def _known(self, who: Principal, session_id: str | None) -> Session | None:
        """The indexed session if it is still there, the caller's, and free for a turn."""
        if session_id is None:
            return None
        try:
            session = await self.conversations.owned(who, session_id)
        except (NotFoundError, ForbiddenError):
            return None
        if await self.conversations.backend.registry.running_in(session.id) is not None:
            return None  # the same conversation asked twice at once: the second goes to a session of its own
        return session

    async def remember(self, who: Principal, model: str, conversation: Sequence[Turn], session_id: str) -> None:
        """File the conversation as the client will send it back next time."""
        await self.index.put(conversation_key(who, model, conversation), session_id)


def seed_messages(turns: Sequence[Turn]) -> list[AnyMessage]:
    """The thread's messages for a conversation written elsewhere: each question and the answer
    after it share a request id, as the pipeline's own rounds do (load_history pairs them so)."""
    messages: list[AnyMessage] = []
    request_id = ""
    for role, text in list(turns)[-SEED_MESSAGES_MAX:]:
        if role == "user":
            request_id = uuid.uuid4().hex
            messages.append(thread_messages.question(text, id=str(uuid.uuid4()), request_id=request_id))
        else:
            messages.append(thread_messages.answer(text, id=str(uuid.uuid4()), request_id=request_id or uuid.uuid4().hex))
            request_id = ""
    return messages
