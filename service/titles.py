"""Session titles (seed: session.go GenerateTitle): one short call to the conversation's model.

The prompt is generate_session_title.yaml. A failed or slow call falls back to the question's
first words, so a new session always gets a title and its SSE stream never waits in vain.
"""

from __future__ import annotations

import asyncio
import logging

from ragline import defaults, prompts
from ragline.models.chat import ChatClient, ChatModelError, ChatOptions
from ragline.models.think import strip_think
from ragline.service.sessions import SessionStore

log = logging.getLogger(__name__)


def fallback_title(query: str) -> str:
    words = " ".join(query.split())
    if len(words) <= defaults.TITLE_MAX_CHARS:
        return words
    return words[: defaults.TITLE_MAX_CHARS - 1].rsplit(" ", 1)[0] + "…"


def clean_title(text: str) -> str:
    lines = [line.strip() for line in strip_think(text).splitlines() if line.strip()]
    title = (lines[0] if lines else "").strip("\"'“”«»「」 ").rstrip("。.!！?？")
    return title[: defaults.TITLE_MAX_CHARS].strip()


async def generate_title(query: str, client: ChatClient) -> str:
    """A title for a conversation starting with `query`; never raises."""
    prompt = prompts.render(prompts.get("generate_session_title").text(), query=query)
    try:
        result = await asyncio.wait_for(
            client.chat([{"role": "user", "content": prompt}], ChatOptions(temperature=0.2, max_tokens=defaults.TITLE_MAX_TOKENS)),
            defaults.TITLE_TIMEOUT_S,
        )
        return clean_title(result.content) or fallback_title(query)
    except (ChatModelError, TimeoutError) as exc:
        log.warning("session title generation failed: %s", exc)
        return fallback_title(query)


async def title_new_session(sessions: SessionStore, session_id: str, query: str, client: ChatClient) -> str | None:
    """Title a session from its first question and store it, unless it got a title meanwhile (that
    one stands). Returns the session's title; None when the session was deleted meanwhile."""
    title = await generate_title(query, client)
    session = await sessions.get(session_id)
    if session is None:
        return None
    if session.title:
        return session.title
    await sessions.patch(session_id, {"title": title})
    return title
