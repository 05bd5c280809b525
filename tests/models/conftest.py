"""Fixtures of the model client tests."""

from __future__ import annotations

import pytest

from ragline.models import retry


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The backoff waits the clients asked for (recorded instead of slept)."""
    recorded: list[float] = []

    async def record(seconds: float) -> None:
        recorded.append(seconds)

    monkeypatch.setattr(retry, "_sleep", record)
    return recorded
