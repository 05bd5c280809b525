"""The end of a run: the saved assistant message and what its client was shown must agree.

A stopped run saves the partial answer the client saw. Otherwise the thread's answer is the
truth: a stream that missed its tail (a crash right after the node) gets the rest, and one that
showed other text (an agent's superseded rounds, a generation redone on takeover) gets a
`replace` carrying the whole saved answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ragline.checkpoints.streams import Event
from ragline.citations.messages import message_text
from ragline.contracts import events
from ragline.contracts.events import as_json
from ragline.service import threads
from ragline.service.relay import Run

Write = Callable[[Event], Awaitable[None]]  # appends an event to the run's log, as the run's last words


async def settle_answer(run: Run, values: dict[str, Any] | None, graph: Any, write: Write) -> None:
    """`values`: the thread after the turn; `graph`: the pipeline, through which edits of the thread go, whichever graph ran."""
    record = run.record
    shown = run.transcript
    if run.cancelled:
        await threads.save_answer(
            graph,
            record.turn,
            query=record.query,
            content=shown.answer,
            references=shown.references,
            stopped=True,
            metadata=run.context.answer_metadata(),
        )
        return
    saved = next((m for m in (values or {}).get("messages", []) if m.id == record.assistant_message_id), None)
    if saved is None:
        return  # the turn failed; the error event told the client
    text = message_text(saved)
    if text == shown.answer:
        return
    turn = record.turn
    if text.startswith(shown.answer):  # the stream missed the tail (a crash right after the node)
        await write(as_json(events.answer(turn, text[len(shown.answer) :])))
    else:
        replace = events.answer(turn, text)
        replace.data = {"replace": True}
        await write(as_json(replace))
