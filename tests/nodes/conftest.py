"""Stages read their services (the knowledge stack) through RunContext.host.services."""

from __future__ import annotations

import pytest

from ragline.services import Services


@pytest.fixture
def services(stack) -> Services:
    return Services(retrieval_factory=lambda: stack)
