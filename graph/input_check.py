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

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")  # lone surrogates too: not text

_SCRIPT = re.compile(r"<\s*script\b|\bjavascript\s*:|<[^>]*\bon[a-z]+\s*=", re.IGNORECASE)

_WHOSE = r"(?:all\s+|any\s+|the\s+|your\s+|my\s+|these\s+|those\s+)?(?:(?:previous|prior|above|earlier|system|original|initial|current|own)\s+)?"
_RULES = r"(?:instructions?|prompts?|rules|guidelines|directions|directives|constraints|programming|guardrails)"
_OVERRIDE = [
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        rf"\b(?:ignore|disregard|forget|override|bypass|skip)\s+{_WHOSE}{_RULES}",
        r"\bdisregard\s+(all\s+|any\s+|the\s+)?(previous|prior|above|system)\b",
        r"\bforget\s+(?:everything|all)\s+(?:you\s+(?:were|have\s+been)\s+told|above|before)",
        r"\b(reveal|print|show|repeat|output|display|tell\s+me|give\s+me|leak)\s+(?:me\s+)?(your|the)\s+(?:full\s+|hidden\s+|initial\s+|original\s+)?(system\s+prompt|instructions|prompt)",
        r"\bwhat\s+(?:is|are)\s+your\s+(?:system\s+prompt|instructions)",
        r"\byou\s+are\s+now\s+(?:a|an|in)\b",
        r"\bfrom\s+now\s+on,?\s+(?:you|ignore|answer\s+only)",
        r"\b(?:pretend|act)\s+(?:that\s+)?(?:you\s+are|to\s+be|as\s+if\s+you)\b.*\b(?:no|without)\s+(?:rules|restrictions|limits|filters)",
        r"\b(?:new|updated)\s+(?:system\s+)?instructions\s*:",
        r"忽略(之前|以上|上面|前面|你的|所有)的?(所有)?(指令|指示|提示|规则)",
        r"(输出|显示|告诉我|打印)(你的)?(系统提示|系统指令|提示词)",
    )
]


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
