"""A whole answer for the doors that return one (MCP's `ask` tool): the turn runs through the
RunManager exactly as a knowledge-chat POST's does (same allow list, session, history, stop), its
events are read back from the StreamManager until `complete`, and folded into plain text with
the references as data: no `<kb .../>` tag reaches the caller.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from ragline import defaults
from ragline.checkpoints.streams import Event, StreamManager
from ragline.citations.plain import Citation, PlainText
from ragline.contracts.events import ResponseType
from ragline.contracts.request import PipelineRequest
from ragline.retrieval.locations import ChunkLocation
from ragline.service.access import Principal, ServiceError
from ragline.service.assistants import Assistant
from ragline.service.conversations import ConversationService
from ragline.service.registry import RunRecord
from ragline.service.replay import Transcript
from ragline.service.runs import RunManager

WAIT_SLICE_S = 5.0  # one blocking read of the stream; the loop re-checks the run's deadline between reads
SESSION_TITLE_CHARS = 60  # a session opened by a tool call is titled by its question (no title model call)


class TurnFailed(ServiceError):
    """The turn ended with an error event; its message is the client's."""


class AnswerReference(BaseModel):
    """A passage the answer was built from; `number` is its `[n]` in the answer, None when it was
    retrieved and given to the model but not cited."""

    number: int | None = Field(None, description="The footnote [n] of this source in the answer; null: retrieved, not cited.")
    attributed: bool = Field(False, description="Cited only by Ragline matching a sentence to it, not by the model itself.")
    chunk_id: str = ""
    knowledge_base_id: str = ""
    document_id: str = Field("", description="The document (knowledge id) the passage belongs to.")
    title: str = ""
    score: float | None = None
    content: str = ""
    chunk_type: str = ""
    source: str = Field("knowledge_base", description="knowledge_base or web_search.")
    url: str = ""
    location: ChunkLocation | None = Field(None, description="Where the passage stands in its document: PDF pages, heading path, "
                                           "character offsets in the document's text.")


class TurnAnswer(BaseModel):
    answer: str = Field(description="The answer as plain text (citations as [n] footnotes when asked).")
    references: list[AnswerReference] = Field(description="Cited sources in footnote order, then the uncited passages.")
    session_id: str = Field(description="Pass it back as session_id to ask a follow-up in the same conversation.")
    message_id: str
    stopped: bool = False
    truncated: bool = Field(False, description="The answer was cut by the output limit.")


async def answer_turn(runs: RunManager, conversations: ConversationService, who: Principal, request: PipelineRequest, *,
                      session_id: str | None = None, footnotes: bool = True, timeout_s: float = defaults.RUN_MAX_S,
                      assistant: Assistant | None = None) -> TurnAnswer:
    """Run one turn in the caller's session (a new one unless `session_id`) and wait for its end;
    with the `assistant` whose settings the request holds (AssistantService.turn), as in RunManager.submit.

    The caller's knowledge bases must be authorized before (the API does it as for knowledge-chat).
    NotFoundError / ForbiddenError for another's session, ConflictError while a turn runs there,
    InvalidRequestError for a model outside the allow list, TurnFailed when the pipeline failed.
    If the caller goes away (the tool call is cancelled), the turn is stopped, as a stop route would.
    """
    if session_id:
        session = await conversations.owned(who, session_id)
    else:
        session = await conversations.create(who, title=_title(request.query))
    record = await runs.submit(who, session, request, assistant)
    try:
        seen = await _follow(runs.backend.streams, record, timeout_s)
    except BaseException:  # cancelled (the client left) or timed out: nobody reads this answer any more
        _stop_soon(runs, record)
        raise
    if seen.error is not None and not seen.transcript.answer:
        raise TurnFailed(seen.error or "the pipeline failed")
    return fold(seen, record, footnotes=footnotes)


@dataclass
class Seen:
    """What the turn's stream carried: the folded transcript, and the two flags it does not keep."""

    transcript: Transcript = field(default_factory=Transcript)
    truncated: bool = False
    error: str | None = None

    def add(self, event: Event) -> None:
        self.transcript.add(event)
        kind = event.get("response_type")
        if kind == ResponseType.ANSWER.value and (event.get("data") or {}).get("truncated"):
            self.truncated = True
        elif kind == ResponseType.ERROR.value:
            self.error = str(event.get("content") or "")


def fold(seen: Seen, record: RunRecord, *, footnotes: bool) -> TurnAnswer:
    """The plain answer and its references, from what the stream carried."""
    plain = PlainText(footnotes=footnotes)
    plain.feed(seen.transcript.answer)  # the whole answer: every tag is complete
    return TurnAnswer(answer=plain.text.strip(), references=_references(plain, seen.transcript.references),
                      session_id=record.session_id, message_id=record.assistant_message_id,
                      stopped=seen.transcript.stopped, truncated=seen.truncated)


def _references(plain: PlainText, retrieved: list[dict[str, Any]]) -> list[AnswerReference]:
    by_key = {item.get("chunk_id") or item.get("url") or "": item for item in retrieved}
    model_cited = {c.number for c in plain.citations if not c.attributed}
    cited: list[AnswerReference] = []
    for citation in plain.sources():
        item = by_key.pop(citation.source_key, None) or by_key.pop(citation.url, None) or {}
        cited.append(_reference(item, citation, attributed=citation.number not in model_cited))
    return cited + [_reference(item) for item in by_key.values()]


def _reference(item: dict[str, Any], citation: Citation | None = None, *, attributed: bool = False) -> AnswerReference:
    """A references-event entry (or, for a cited source it lacks, the tag's own fields)."""
    return AnswerReference(
        number=citation.number if citation else None,
        attributed=attributed,
        chunk_id=item.get("chunk_id") or (citation.chunk_id if citation else ""),
        knowledge_base_id=item.get("knowledge_base_id") or (citation.knowledge_base_id if citation else ""),
        document_id=item.get("knowledge_id") or (citation.knowledge_id if citation else ""),
        title=item.get("title") or (citation.title if citation else ""),
        score=item.get("score"),
        content=item.get("content", ""),
        chunk_type=item.get("chunk_type", ""),
        source=item.get("source", "web_search" if citation and citation.kind == "web" else "knowledge_base"),
        url=item.get("url") or (citation.url if citation else ""),
        location=item.get("location"),
    )


async def _follow(streams: StreamManager, record: RunRecord, timeout_s: float) -> Seen:
    """The turn's events from its first to `complete` (the run always ends with one, also after an error or a stop)."""
    seen, after = Seen(), None
    async with asyncio.timeout(timeout_s):
        while not seen.transcript.complete:
            for entry in await streams.wait(record.session_id, record.assistant_message_id, after, WAIT_SLICE_S):
                seen.add(entry.event)
                after = entry.id
    return seen


_stopping: set[asyncio.Task[None]] = set()


def _stop_soon(runs: RunManager, record: RunRecord) -> None:
    """Stop the run in a task of its own: the cancelled caller cannot await anything any more."""
    task = asyncio.get_running_loop().create_task(runs.stop(record))
    _stopping.add(task)
    task.add_done_callback(_stopping.discard)


def _title(query: str) -> str:
    line = " ".join(query.split())
    return line if len(line) <= SESSION_TITLE_CHARS else line[: SESSION_TITLE_CHARS - 1].rstrip() + "…"
