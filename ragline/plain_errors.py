"""Validation failures in our words: every door (the CLI, REST, the OpenAI-compatible API) says
"query is too long: at most 32,000 characters", not the validation library's "String should have
at most 32000 characters" or "Value error, ...".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

_LIMITS = {
    "string_too_long": "is too long: at most {max_length:,} characters",
    "string_too_short": "is too short: at least {min_length:,} character(s)",
    "too_long": "has too many items: at most {max_length:,}",
    "too_short": "needs at least {min_length:,} item(s)",
    "greater_than_equal": "must be at least {ge}",
    "greater_than": "must be more than {gt}",
    "less_than_equal": "must be at most {le}",
    "less_than": "must be less than {lt}",
}
_KINDS = {
    "missing": "is required",
    "extra_forbidden": "is not a known setting",
    "int_parsing": "must be a whole number",
    "int_type": "must be a whole number",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "bool_parsing": "must be true or false",
    "bool_type": "must be true or false",
    "string_type": "must be text",
    "list_type": "must be a list",
    "dict_type": "must be an object",
    "model_type": "must be an object",
}


def describe(error: Mapping[str, Any], names: Mapping[str, str] | None = None) -> str:
    """One error of `ValidationError.errors()` as a sentence naming the field (by `names`, when
    the door calls it otherwise: the CLI's `--max-tokens` is the request's `summary.max_tokens`)."""
    where = ".".join(str(part) for part in error.get("loc", ()) if part != "__root__")
    where = (names or {}).get(where, where)
    kind, context = error.get("type", ""), error.get("ctx") or {}
    if kind == "value_error" and "error" in context:
        message = str(context["error"])  # our own validators' words, as written
    elif kind == "enum" and "expected" in context:
        message = f"must be one of {context['expected']}"
    elif kind == "literal_error" and "expected" in context:
        message = f"must be {context['expected']}"
    elif kind in _LIMITS:
        try:
            message = _LIMITS[kind].format(**context)
        except (KeyError, ValueError):
            message = str(error.get("msg", "is not valid"))
    else:
        message = _KINDS.get(kind) or str(error.get("msg", "is not valid")).removeprefix("Value error, ")
    if not where:
        return message
    return f"{where} {message}" if kind in _LIMITS or kind in _KINDS or kind in ("enum", "literal_error") else f"{where}: {message}"


def validation_message(exc: ValidationError, limit: int = 5, names: Mapping[str, str] | None = None) -> str:
    """The first `limit` errors, joined."""
    return "; ".join(describe(error, names) for error in exc.errors()[:limit])
