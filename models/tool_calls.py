"""Tool calls of a chat model's reply, as OpenAI's function-calling wire sends them.

A streamed reply sends each call in pieces (`delta.tool_calls[i]`: the id and name once, the
arguments as JSON text cut anywhere); a whole reply sends `message.tool_calls`. Both go through
one `ToolCallAccumulator`, which joins the pieces by index and parses each call's arguments once,
at the end. Arguments that are not a JSON object do not fail the reply: that call carries an
`error` (the agent answers it with the error as its result, and never runs it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

ARGUMENTS_SHOWN = 200  # characters of malformed arguments quoted back in the error


@dataclass(frozen=True)
class ToolCallRequest:
    """One tool call the model asked for."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    raw_arguments: str = ""  # the JSON text as the model wrote it (sent back to it in the conversation)
    error: str = ""  # why the call cannot run (arguments not a JSON object); "" when it can

    def as_wire(self) -> dict[str, Any]:
        """The call as an assistant message's `tool_calls` item (OpenAI's shape)."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.raw_arguments or "{}"}}


@dataclass
class _Pieces:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ToolCallAccumulator:
    """The pieces of a reply's tool calls, joined by their index."""

    def __init__(self) -> None:
        self._calls: dict[int, _Pieces] = {}

    def __bool__(self) -> bool:
        return bool(self._calls)

    def feed(self, deltas: Any) -> None:
        """Add one chunk's `tool_calls` deltas (dicts, or a provider SDK's objects)."""
        if not isinstance(deltas, list):
            return
        for position, delta in enumerate(deltas):
            item = _as_dict(delta)
            index = item.get("index")
            pieces = self._calls.setdefault(index if isinstance(index, int) else len(self._calls) + position, _Pieces())
            pieces.id = pieces.id or str(item.get("id") or "")
            function = _as_dict(item.get("function"))
            name = function.get("name")
            if isinstance(name, str) and name:
                pieces.name = pieces.name or name
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                pieces.arguments.append(arguments)
            elif isinstance(arguments, dict):  # a few providers send the object itself
                pieces.arguments.append(json.dumps(arguments))

    def calls(self) -> tuple[ToolCallRequest, ...]:
        """Every call, in index order, its arguments parsed."""
        return tuple(parse_call(pieces.id or f"call_{index}", pieces.name, "".join(pieces.arguments))
                     for index, pieces in sorted(self._calls.items()))


def parse_call(call_id: str, name: str, raw: str) -> ToolCallRequest:
    """A call with its arguments parsed: a JSON object, or an error saying what is wrong."""
    if not name:
        return ToolCallRequest(call_id, name, {}, raw, "the tool call names no tool")
    if not raw.strip():
        return ToolCallRequest(call_id, name, {}, raw)
    try:
        arguments = json.loads(raw)
    except json.JSONDecodeError as exc:
        return ToolCallRequest(call_id, name, {}, raw, f"the arguments are not valid JSON ({exc.msg} at character {exc.pos}): "
                                                     f"{raw[:ARGUMENTS_SHOWN]}")
    if not isinstance(arguments, dict):
        return ToolCallRequest(call_id, name, {}, raw, f"the arguments must be a JSON object, not {type(arguments).__name__}")
    return ToolCallRequest(call_id, name, arguments, raw)


def _as_dict(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if value is None:
        return {}
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        dumped = dump()
        return dumped if isinstance(dumped, dict) else {}
    return {key: getattr(value, key) for key in ("index", "id", "type", "function", "name", "arguments") if hasattr(value, key)}
