"""SSE writes: a reader that fell behind catches up in one write, frames unchanged."""

from __future__ import annotations

from ragline.api.sse import follow
from ragline.checkpoints.streams import MemoryStreamManager


async def test_a_reader_that_fell_behind_gets_its_backlog_in_one_write():
    streams = MemoryStreamManager()
    for n in range(3):
        await streams.append("s", "m", {"response_type": "answer", "content": f"t{n}"})
    await streams.append("s", "m", {"response_type": "complete"})
    writes = [write async for write in follow(streams, "s", "m")]
    assert writes[0].startswith("retry:")
    assert len(writes) == 2
    assert [line for line in writes[1].split("\n") if line.startswith("id:")] == [f"id: m:{n}" for n in range(1, 5)]
    assert writes[1].endswith("\n\n") and writes[1].count("\n\n") == 4  # four whole frames


async def test_a_resumed_replay_is_one_write_too():
    streams = MemoryStreamManager()
    for n in range(3):
        await streams.append("s", "m", {"response_type": "answer", "content": f"t{n}"})
    await streams.append("s", "m", {"response_type": "complete"})
    writes = [write async for write in follow(streams, "s", "m", after="1", coalesce_replay=True)]
    assert len(writes) == 2 and '"complete"' in writes[1]
