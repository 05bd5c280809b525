"""Split inline <think>...</think> reasoning from answer text, across any chunk boundary.

Some models (DeepSeek-R1 and Qwen3 on plain OpenAI-compatible servers) put their reasoning in the
content between think tags instead of a separate field. The splitter holds back only a tail
that could still be the start of a tag, so nothing is lost and nothing is delayed for long.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

OPEN, CLOSE = "<think>", "</think>"
THINK_BLOCK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL)


@dataclass(frozen=True)
class Part:
    kind: Literal["answer", "thinking"]
    text: str


def strip_think(text: str) -> str:
    """regThinkTags: drop reasoning blocks (closed or cut off) from a stored answer."""
    return THINK_BLOCK.sub("", text).strip()


def _partial_tag_suffix(text: str, tag: str) -> int:
    """Length of the longest suffix of text that is a proper prefix of tag."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:size]):
            return size
    return 0


class ThinkSplitter:
    def __init__(self) -> None:
        self._buffer = ""
        self._inside = False

    def feed(self, text: str) -> list[Part]:
        self._buffer += text
        parts: list[Part] = []
        while self._buffer:
            tag = CLOSE if self._inside else OPEN
            index = self._buffer.find(tag)
            if index >= 0:
                self._emit(parts, self._buffer[:index])
                self._buffer = self._buffer[index + len(tag) :]
                self._inside = not self._inside
                continue
            keep = _partial_tag_suffix(self._buffer, tag)
            self._emit(parts, self._buffer[: len(self._buffer) - keep])
            self._buffer = self._buffer[len(self._buffer) - keep :]
            break
        return parts

    def flush(self) -> list[Part]:
        parts: list[Part] = []
        self._emit(parts, self._buffer)
        self._buffer = ""
        return parts

    def _emit(self, parts: list[Part], text: str) -> None:
        if text:
            parts.append(Part("thinking" if self._inside else "answer", text))
