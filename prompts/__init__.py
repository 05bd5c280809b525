"""Prompt templates (prompts/*.yaml, the seed's config/prompt_templates) and their one renderer.

Each YAML file is a list of templates with an `id`, an optional `default: true`, and text fields
(`content`, or `system` + `user`, or `response` + `prompt`). Per-request overrides replace a
template's text; `render` fills the placeholders either way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import Any

import yaml

TEMPLATE_FILES = (
    "rewrite",
    "intent_prompts",
    "system_prompt",
    "context_template",
    "quoted_context",
    "fallback",
    "generate_session_title",
    "keywords_extraction",
    "graph_extraction",
    "generate_questions",
    "generate_summary",
    "agent",
)

_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


class PromptError(LookupError):
    """A template file or id that does not exist."""


@dataclass(frozen=True)
class PromptTemplate:
    id: str
    default: bool = False
    fields: dict[str, str] = field(default_factory=dict)

    def text(self, name: str = "content") -> str:
        try:
            return self.fields[name]
        except KeyError:
            raise PromptError(f"template {self.id!r} has no {name!r} text") from None


@cache
def load(name: str) -> tuple[PromptTemplate, ...]:
    """All templates of prompts/<name>.yaml, read from the installed package."""
    if name not in TEMPLATE_FILES:
        raise PromptError(f"unknown prompt file {name!r}; known: {', '.join(TEMPLATE_FILES)}")
    text = resources.files(__package__).joinpath(f"{name}.yaml").read_text(encoding="utf-8")
    entries: list[dict[str, Any]] = yaml.safe_load(text) or []
    return tuple(
        PromptTemplate(
            id=str(entry["id"]),
            default=bool(entry.get("default", False)),
            fields={key: str(value) for key, value in entry.items() if key not in ("id", "default")},
        )
        for entry in entries
    )


def get(name: str, template_id: str | None = None) -> PromptTemplate:
    """A template by id, or the file's default template."""
    templates = load(name)
    for template in templates:
        if (template_id is None and template.default) or template.id == template_id:
            return template
    if template_id is None and templates:
        return templates[0]
    raise PromptError(f"no template {template_id!r} in {name}.yaml")


def find(name: str, template_id: str) -> PromptTemplate | None:
    return next((t for t in load(name) if t.id == template_id), None)


def render(template: str, **values: object) -> str:
    """types.RenderPromptPlaceholders: fill {name} placeholders that have a value.

    Unknown placeholders stay as they are, so literal braces (JSON examples) survive.
    """

    def fill(match: re.Match[str]) -> str:
        key = match.group(1)
        return str(values[key]) if key in values and values[key] is not None else match.group(0)

    return _PLACEHOLDER.sub(fill, template)


def detect_language(text: str) -> str:
    """A name for {language}: Chinese when the text has CJK characters, else 'the user's language'."""
    return "Chinese (简体中文)" if _CJK.search(text or "") else "the same language as the question"


def current_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


def current_date() -> str:
    """The day only: a system prompt that changes every minute could never be served from the prompt cache."""
    return datetime.now(UTC).strftime("%Y-%m-%d")
