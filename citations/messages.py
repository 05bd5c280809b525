"""Walking LangChain message contents and tool arguments without touching anything else.

The seed's EncodeMessages/DecodeToolCalls (internal/modelcontext/registry.go, resources.go)
rewrite text fields only: images and other binary parts pass through unchanged, and so does
every non-string argument value. These helpers give the Registry that traversal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.messages import BaseMessage

from ragline.contracts.thread_messages import REASONING_KEY

TextFn = Callable[[str], str]
KeyedTextFn = Callable[[str, str | None], str]


def message_text(message: BaseMessage) -> str:
    """A message's text: its string content, or its text parts joined (images and the rest left out)."""
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def map_content(content: str | list[Any], fn: TextFn) -> str | list[Any]:
    """Apply `fn` to a message's text: the string, or each text part of a multimodal list."""
    if isinstance(content, str):
        return fn(content)
    parts: list[Any] = []
    for part in content:
        if isinstance(part, str):
            parts.append(fn(part))
        elif isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
            parts.append({**part, "text": fn(part["text"])})
        else:
            parts.append(part)
    return parts


def map_strings(value: Any, fn: KeyedTextFn, key: str | None = None) -> Any:
    """Apply `fn(string, key)` to every string in a JSON-like value; `key` is the nearest dict key."""
    if isinstance(value, str):
        return fn(value, key)
    if isinstance(value, dict):
        return {k: map_strings(v, fn, k if isinstance(k, str) else key) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(map_strings(item, fn, key) for item in value)
    return value


def map_message_text(message: BaseMessage, fn: TextFn) -> BaseMessage:
    """A copy of `message` with `fn` applied to its content and reasoning text."""
    update: dict[str, Any] = {"content": map_content(message.content, fn)}
    reasoning = message.additional_kwargs.get(REASONING_KEY)
    if isinstance(reasoning, str):
        update["additional_kwargs"] = {**message.additional_kwargs, REASONING_KEY: fn(reasoning)}
    return message.model_copy(update=update)
