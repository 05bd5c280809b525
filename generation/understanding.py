"""Parse the rewrite + intent JSON of query_understand, robustly (seed: query_understand.go).

Small models wrap JSON in Markdown fences, rename fields, add prose around it, or get cut off by
the output limit. Whatever is recoverable is recovered; when nothing is, the original query is
kept and the intent stays empty, which the pipeline treats as "search".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ragline.contracts.state import normalize_intent

REWRITE_ALIASES = ("rewrite_query", "rewritten_query", "rewrite", "rewritten", "query", "question")
INTENT_ALIASES = ("intent", "intention", "query_intent", "category")
IMAGE_ALIASES = ("image_description", "image_desc", "description", "image_caption", "caption")
OCR_ALIASES = ("ocr", "ocr_text", "image_text", "text_in_image")

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)(?:```|$)", re.DOTALL)


@dataclass(frozen=True)
class Understanding:
    rewrite_query: str
    intent: str
    image_description: str = ""
    parsed: bool = True


def _first_object(text: str) -> dict | None:
    """The first JSON object in text, tolerating prose before and after it."""
    decoder = json.JSONDecoder()
    for start in (m.start() for m in re.finditer(r"\{", text)):
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _pick(data: dict, aliases: tuple[str, ...]) -> str:
    lowered = {str(k).strip().lower(): v for k, v in data.items()}
    for alias in aliases:
        value = lowered.get(alias)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def _salvage_field(text: str, aliases: tuple[str, ...], allow_unterminated: bool) -> str:
    """A string field of JSON that may be cut off: `"name": "value...` with or without its quote."""
    for alias in aliases:
        pattern = rf'"{alias}"\s*:\s*"((?:[^"\\]|\\.)*)(")?'
        match = re.search(pattern, text, re.IGNORECASE | re.DOTALL)
        if not match or (match.group(2) is None and not allow_unterminated):
            continue
        raw = match.group(1)
        if raw.endswith("\\") and not raw.endswith("\\\\"):
            raw = raw[:-1]  # an escape cut in half
        try:
            value = json.loads(f'"{raw}"')
        except json.JSONDecodeError:
            value = raw
        if value.strip():
            return value.strip()
    return ""


def _unwrap(text: str) -> str:
    fence = _FENCE.search(text)
    return fence.group(1) if fence else text


def parse_understanding(output: str, original_query: str) -> Understanding:
    """Rewrite, intent and image description from the model's output, never raising."""
    body = _unwrap(output or "").strip()
    # the whole output first: a fence inside a JSON string ("```") must not cut the object apart
    data = _first_object(output or "") or _first_object(body)
    if data is not None:
        description = _pick(data, IMAGE_ALIASES)
        ocr = _pick(data, OCR_ALIASES)
        if ocr and ocr not in description:
            description = f"{description}\n{ocr}".strip()  # OCR fields are merged into the description
        return Understanding(
            rewrite_query=_pick(data, REWRITE_ALIASES) or original_query,
            intent=normalize_intent(_pick(data, INTENT_ALIASES)),
            image_description=description,
        )
    # Cut off by the token limit: keep the fields already written. A rewrite or intent must be
    # complete (closing quote); the image description may be partial.
    rewrite = _salvage_field(body, REWRITE_ALIASES, allow_unterminated=False)
    intent = _salvage_field(body, INTENT_ALIASES, allow_unterminated=False)
    description = _salvage_field(body, IMAGE_ALIASES, allow_unterminated=True)
    if rewrite or intent or description:
        return Understanding(rewrite or original_query, normalize_intent(intent), description)
    return Understanding(original_query, "", "", parsed=False)
