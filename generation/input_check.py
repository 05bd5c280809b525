"""ValidateInput: whether a question may reach the pipeline at all (seed: utils.ValidateInput,
called by into_chat_message.go, which refuses the turn when the check fails).

Ragline runs the check when the turn begins, before any search or model call, so a refused
question costs nothing and the pure chat pipeline (which has no into_chat_message) is gated as
well. Refused: control characters (other than tab and line breaks), markup that would run as
script where a question is shown, and phrasing that tries to override the assistant's
instructions or pull out its system prompt. Only the phrases are matched, never single words:
"how do I ignore a sensor reading?" is a question, "ignore all previous instructions" is not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ragline.ingestion.instructions import OVERRIDE

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")  # lone surrogates too: not text

_SCRIPT = re.compile(r"<\s*script\b|\bjavascript\s*:|<[^>]*\bon[a-z]+\s*=", re.IGNORECASE)

_OVERRIDE = OVERRIDE  # shared with the document check (ingestion/instructions.py)


@dataclass(frozen=True)
class Refusal:
    """Why a question was refused: a stable reason code and the words that triggered it."""

    reason: str  # control_characters, script, instruction_override
    evidence: str

    @property
    def message(self) -> str:
        what = {
            "control_characters": "it contains control characters",
            "script": "it contains script markup",
            "instruction_override": f"it tries to override the assistant's instructions ({self.evidence!r})",
        }[self.reason]
        return f"The question was refused: {what}. Please rephrase it as a question."


def validate_input(text: str) -> Refusal | None:
    """None when the question may be answered, else the first reason to refuse it."""
    if match := _CONTROL.search(text):
        return Refusal("control_characters", repr(match.group(0)))
    if match := _SCRIPT.search(text):
        return Refusal("script", match.group(0))
    for pattern in _OVERRIDE:
        if match := pattern.search(text):
            return Refusal("instruction_override", match.group(0))
    return None
