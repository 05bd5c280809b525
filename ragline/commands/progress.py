"""Progress on stderr: a bar redrawn in place on a terminal, plain lines anywhere else."""

from __future__ import annotations

import sys
import time
from typing import Any


class ProgressBar:
    """A one-line progress bar on stderr, redrawn at most ten times a second."""

    def __init__(self, label: str, stream: Any = None, *, live: bool = True) -> None:
        self.label, self.stream = label, stream or sys.stderr
        self.live = live  # False: no bar (a log file gets the lines, not a redrawn bar)
        self._last = 0.0
        self._shown = 0  # characters of the line drawn last, to blank a longer one

    def update(self, done: int, total: int, label: str | None = None) -> None:
        now = time.monotonic()
        if not self.live or (done < total and now - self._last < 0.1):
            return
        self._last = now
        width = 30
        filled = int(width * done / total) if total else width
        text = f"{label or self.label:<18} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}"
        self.stream.write("\r" + text.ljust(self._shown))
        self.stream.flush()
        self._shown = len(text)

    def close(self) -> None:
        if self._shown:
            self.stream.write("\n")
            self.stream.flush()
            self._shown = 0

    def line(self, text: str) -> None:
        """A line that stays (a file's result), printed over the bar, which redraws on its next update."""
        if self._shown:
            self.stream.write("\r" + " " * self._shown + "\r")
            self._shown = 0
        self.stream.write(text + "\n")
        self.stream.flush()


def on_terminal(stream: Any = None) -> bool:
    isatty = getattr(stream or sys.stderr, "isatty", None)
    return bool(isatty and isatty())
