"""A value built on first use, once, whichever thread asks first: how the root opens its parts."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Lazy(Generic[T]):
    """`factory`'s value, built by the first `get` (the others wait for it) and kept."""

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._value: T | None = None
        self._lock = threading.Lock()

    def get(self) -> T:
        with self._lock:
            if self._value is None:
                self._value = self._factory()
            return self._value

    @property
    def opened(self) -> T | None:
        """The value if it was built, without building it."""
        return self._value
