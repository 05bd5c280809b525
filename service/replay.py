"""What a client has already seen of an answer: coalesced replays and the delivered text.

- `coalesce` (seed: continue_stream_coalesce.go) merges runs of consecutive answer or thinking
  deltas into one frame, so replaying a long answer costs a few frames instead of thousands; the
  merged frame carries the id of its last entry, so resuming after it loses nothing.
- `Transcript` folds events into the text a client shows: answer and thinking deltas appended, a
  `replace` event (a resumed generation superseding a partial answer) replacing the text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ragline.checkpoints.streams import Event, StreamEntry
from ragline.contracts.events import ResponseType

DELTA_TYPES = (ResponseType.ANSWER.value, ResponseType.THINKING.value, ResponseType.REFLECTION.value)


def is_delta(event: Event) -> bool:
    """An unfinished increment with nothing but text: safe to merge with its neighbours."""
    return (
        event.get("response_type") in DELTA_TYPES
        and not event.get("done")
        and not event.get("data")
        and not event.get("knowledge_references")
    )


def coalesce(entries: list[StreamEntry]) -> list[StreamEntry]:
    merged: list[StreamEntry] = []
    for entry in entries:
        previous = merged[-1] if merged else None
        if (
            previous is not None
            and is_delta(entry.event)
            and is_delta(previous.event)
            and previous.event["response_type"] == entry.event["response_type"]
            and previous.event.get("id") == entry.event.get("id")
        ):
            event = {**previous.event, "content": previous.event.get("content", "") + entry.event.get("content", "")}
            merged[-1] = StreamEntry(entry.id, event)
        else:
            merged.append(entry)
    return merged


def is_replace(event: Event) -> bool:
    return bool((event.get("data") or {}).get("replace"))


@dataclass
class Transcript:
    """The answer and thinking text a client has been shown, and the other events it has seen."""

    answer: str = ""
    thinking: str = ""
    others: list[str] = field(default_factory=list)
    complete: bool = False
    stopped: bool = False
    failed: bool = False
    references: list[dict[str, Any]] = field(default_factory=list)

    def add(self, event: Event) -> None:
        kind = event.get("response_type")
        text = event.get("content") or ""
        if kind == ResponseType.ANSWER.value and (text or is_replace(event)):
            self.answer = text if is_replace(event) else self.answer + text
        elif kind == ResponseType.THINKING.value and (text or is_replace(event)):
            self.thinking = text if is_replace(event) else self.thinking + text
        else:
            self.others.append(signature(event))
            if kind == ResponseType.REFERENCES.value:
                self.references = list(event.get("knowledge_references") or [])
            elif kind == ResponseType.STOP.value:
                self.stopped = True
            elif kind == ResponseType.ERROR.value:
                self.failed = True
            elif kind == ResponseType.COMPLETE.value:
                self.complete = True

    @classmethod
    def of(cls, events: list[Event]) -> Transcript:
        transcript = cls()
        for event in events:
            transcript.add(event)
        return transcript


def signature(event: Event) -> str:
    """Identity of a non-delta event, to recognise it when a resumed run emits it again."""
    return json.dumps(event, sort_keys=True, ensure_ascii=False)
