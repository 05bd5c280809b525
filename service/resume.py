"""ResumeFilter: a resumed run must not show the client anything twice.

A run taken over after its replica died restarts the interrupted node from the last checkpoint,
so it emits again what the dead replica had already appended. The filter compares the new events
with the stream's transcript: answer/thinking text still inside the delivered text is dropped,
the first text beyond it goes out as the remainder, and a generation that diverges goes out once
as a `replace` event (data.replace) carrying the whole new text, which supersedes the partial
answer. Non-text events already in the stream (progress cards, references) are dropped once each.
"""

from __future__ import annotations

from collections import Counter

from ragline.checkpoints.streams import Event
from ragline.contracts.events import ResponseType
from ragline.service.replay import Transcript, signature


class _CatchUp:
    """One text channel (answer or thinking) catching up with what was delivered."""

    def __init__(self, delivered: str) -> None:
        self.delivered = delivered
        self.new = ""
        self.live = False

    def feed(self, event: Event) -> Event | None:
        if self.live:
            return event
        self.new += event.get("content") or ""
        if self.delivered.startswith(self.new):
            return None
        self.live = True
        if self.new.startswith(self.delivered):
            return {**event, "content": self.new[len(self.delivered) :]}
        return {**event, "content": self.new, "data": {**(event.get("data") or {}), "replace": True}}


class ResumeFilter:
    def __init__(self, delivered: Transcript) -> None:
        self._text = {
            ResponseType.ANSWER.value: _CatchUp(delivered.answer),
            ResponseType.THINKING.value: _CatchUp(delivered.thinking),
        }
        self._seen = Counter(delivered.others)

    def __call__(self, event: Event) -> Event | None:
        channel = self._text.get(event.get("response_type", ""))
        if channel is not None and event.get("content"):
            return channel.feed(event)
        key = signature(event)
        if self._seen[key] > 0:
            self._seen[key] -= 1
            return None
        return event
