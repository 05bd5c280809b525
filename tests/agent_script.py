"""Agent mode's scripted facts and replies, shared by the graph and the API tests: two passages a
multi-hop question needs (who designed the sensor, where that person was born), and the model's
side of reading them: the handles it was given and an answer that cites one passage of each round."""

from __future__ import annotations

import re
from typing import Any

from tests.scripted_model import Reply

DESIGNER = "The Aurora sensor was designed by the engineer Mira Holt in 2019."
BIRTHPLACE = "Mira Holt was born in Tromsø, a city in northern Norway."
QUESTION = "Where was the designer of the Aurora sensor born?"


def tool_messages(body: dict[str, Any]) -> list[str]:
    return [m.get("content") or "" for m in body.get("messages", []) if m.get("role") == "tool"]


def alias_of(body: dict[str, Any], words: str) -> str:
    """The handle (cN) under which the model was given the passage containing `words`."""
    for content in tool_messages(body):
        for alias, text in re.findall(r'<result id="(c\d+)"[^>]*>\n(.*?)\n</result>', content, re.S):
            if words in text:
                return alias
    raise AssertionError(f"no passage with {words!r} was given to the model")


class CitingAnswer(Reply):
    """The answer of the third request: cites the passages of both rounds by the handles it read."""

    def cite(self, body: dict[str, Any]) -> bool:
        designer, birthplace = alias_of(body, "designed by"), alias_of(body, "born in")
        self.chunks = Reply.text(f'Mira Holt designed it <ref id="{designer}"/> and she was born in Tromsø <ref id="{birthplace}"/>.').chunks
        return True
