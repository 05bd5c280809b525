"""Request work stops when its client leaves."""

from __future__ import annotations

import asyncio

import pytest

from ragline import defaults
from ragline.api.errors import ClientGone
from ragline.api.inputs import while_connected


class _Request:
    def __init__(self, leaves_after: int) -> None:
        self.polls, self.leaves_after = 0, leaves_after

    async def is_disconnected(self) -> bool:
        self.polls += 1
        return self.polls >= self.leaves_after


async def test_work_is_cancelled_when_the_client_leaves(monkeypatch):
    monkeypatch.setattr(defaults, "DISCONNECT_POLL_S", 0.01)
    cancelled = asyncio.Event()

    async def endless() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(ClientGone):
        await while_connected(_Request(leaves_after=2), endless())  # type: ignore[arg-type]
    assert cancelled.is_set()


async def test_work_that_finishes_returns_its_result(monkeypatch):
    monkeypatch.setattr(defaults, "DISCONNECT_POLL_S", 0.01)

    async def quick() -> str:
        await asyncio.sleep(0.03)
        return "done"

    assert await while_connected(_Request(leaves_after=10**6), quick()) == "done"  # type: ignore[arg-type]


def test_names_lose_bidirectional_controls_that_would_disguise_a_file_type():
    from hypothesis import given
    from hypothesis import strategies as st

    from ragline.api.inputs import file_name, plain_text

    assert file_name("invoice\u202efdp.exe") == "invoicefdp.exe"
    assert plain_text("Report \u2066draft\u2069 \u200f") == "Report draft"

    @given(st.text(alphabet=st.sampled_from("ab.\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"), min_size=1))
    def no_bidi_survives(raw: str) -> None:
        cleaned = plain_text(raw)
        assert not set(cleaned) & set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")

    no_bidi_survives()
