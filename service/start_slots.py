"""Start slots: a burst of new turns takes its turn instead of stalling the answers already streaming.

What a turn does before its answer streams (settling its thread, the graph's first stages, their
checkpoints) is CPU on the one event loop that also relays every streaming answer's tokens. When
hundreds of turns arrive within a second, that work alone needs more than the second's CPU; started
all at once, hundreds of half-started turns share every pass of the loop, and each token of each
answer already streaming waits behind them. So a turn holds one of a few start slots from the
start of its run until its answer begins to stream, and the others wait for a slot in order.
Answers in flight keep their pace: `benchmarks/load.py --n 500` gave a p99 of 14 ms with 8 slots
against 70 ms with none (medians of 3), and in process first tokens came no later. With Redis a
turn also holds its slot through Redis round trips, so there first tokens come somewhat later.

A slot is also freed `hold_s` after it was taken, whatever its turn is doing: a turn that waits on
a slow remote model (query rewrite, rerank, web search) is not using the loop, and must not keep
the next ones from starting for longer than that.
"""

from __future__ import annotations

import asyncio


class StartSlot:
    """One turn's slot: freed once, by its answer starting, its run ending, or the hold timer."""

    def __init__(self, semaphore: asyncio.Semaphore | None, hold_s: float) -> None:
        self._semaphore = semaphore
        self._timer = asyncio.get_running_loop().call_later(hold_s, self.free) if semaphore is not None else None

    @property
    def held(self) -> bool:
        return self._semaphore is not None

    def free(self) -> None:
        if self._semaphore is None:
            return
        semaphore, self._semaphore = self._semaphore, None
        if self._timer is not None:
            self._timer.cancel()
        semaphore.release()


class StartSlots:
    """`slots` turns start at a time (0: no limit); each holds its slot at most `hold_s` seconds."""

    def __init__(self, slots: int, hold_s: float) -> None:
        self.hold_s = hold_s
        self._semaphore = asyncio.Semaphore(slots) if slots > 0 else None
        self._waiting = 0

    @property
    def waiting(self) -> int:
        """Turns waiting for a slot now."""
        return self._waiting

    async def take(self) -> StartSlot:
        """A slot, once one is free (slots go to waiting turns in the order they asked)."""
        if self._semaphore is None:
            return StartSlot(None, self.hold_s)
        self._waiting += 1
        try:
            await self._semaphore.acquire()
        finally:
            self._waiting -= 1
        return StartSlot(self._semaphore, self.hold_s)
