"""Dify's External Knowledge API, the protocol: its request, its records, its metadata filter.

Dify (docs.dify.ai, "External Knowledge API") POSTs `{knowledge_id, query, retrieval_setting:
{top_k, score_threshold}, metadata_condition?}` and reads `{"records": [{content, score, title,
metadata}]}`. A `metadata_condition` filters on what a Ragline document carries: its `title`,
`file_name`, `source`, `file_type`, `tags`, `chunk_count`, `created_at`, `updated_at`,
`document_id`, and any scalar its ingestion stored in the document's metadata. Those are also the
document fields of every record's `metadata`, so a filter names what a record shows.

The search itself is the REST search route's (api/knowledge.py `hybrid_search`); this module only
turns the request into a SearchRequest and the hits into records.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ragline import defaults
from ragline.contracts.passages import SearchResult
from ragline.retrieval.types import Knowledge

MAX_TOP_K = 200  # the REST search's rerank_top_k bound
MAX_CONDITIONS = 50
MAX_SCOPED_DOCUMENTS = 200  # the REST search's knowledge_ids bound; a wider match is filtered after the search
UPLOAD_PREFIX = "upload:"
TEXT_PREFIX = "text:"


class MetadataConditionError(ValueError):
    """A metadata condition Ragline cannot evaluate (unknown operator, a value of the wrong kind)."""


# --- the request and the response, as Dify's specification names them ---


class Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")  # fields a newer Dify adds must not break older servers


class RetrievalSetting(Lenient):
    top_k: int = Field(ge=1, le=MAX_TOP_K, description="Maximum number of records to return.")
    score_threshold: float = Field(ge=0, le=1, description="Minimum score of a record (0.0 when Dify's threshold is off).")


class Condition(Lenient):
    name: str | list[str] = Field(description="The metadata field to filter on (a list: any of these fields).")
    comparison_operator: str = Field(max_length=32, description="One of Dify's comparison operators, e.g. contains, is, in, >, before.")
    value: str | int | float | list[str] | None = Field(None, description="Omitted for empty and not empty.")

    @field_validator("name")
    @classmethod
    def _named(cls, value: str | list[str]) -> str | list[str]:
        names = [value] if isinstance(value, str) else value
        if not names or len(names) > 20 or any(not n.strip() or len(n) > 200 for n in names):
            raise ValueError("name is one field name (or a list of at most 20), each 1 to 200 characters")
        return value


class MetadataCondition(Lenient):
    logical_operator: Literal["and", "or"] = "and"
    conditions: list[Condition] = Field(max_length=MAX_CONDITIONS)


class RetrievalRequest(Lenient):
    knowledge_id: str = Field(min_length=1, max_length=200, description="A Ragline knowledge base, by name or id.")
    query: str = Field(min_length=1, max_length=4000)
    retrieval_setting: RetrievalSetting
    metadata_condition: MetadataCondition | None = None

    @field_validator("query")
    @classmethod
    def _has_words(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the query holds nothing but spaces")
        return value


class Record(BaseModel):
    content: str
    score: float = Field(ge=0, le=1)
    title: str
    metadata: dict[str, Any] = Field(description="The document's fields (those a metadata_condition can name) and the chunk's.")


class RetrievalResponse(BaseModel):
    records: list[Record]


class RetrievalError(BaseModel):
    """The specification's error body: 1001, 1002, 2001 are its own codes; the rest are Ragline's."""

    error_code: int
    error_msg: str


# --- what a document shows to a filter and in a record ---


def file_name_of(document: Knowledge) -> str:
    """An upload's file name, or the last part of a path or URL source; text documents have none."""
    if document.source.startswith(TEXT_PREFIX):
        return ""
    return document.source.removeprefix(UPLOAD_PREFIX).rstrip("/").rsplit("/", 1)[-1]


def document_fields(document: Knowledge) -> dict[str, Any]:
    """The fields a condition can name; the document's own metadata never overrides these."""
    own = {key: value for key, value in document.metadata.items() if _plain(value)}
    tags = document.metadata.get("tags")
    return {
        **own,
        "document_id": document.id,
        "knowledge_base_id": document.knowledge_base_id,
        "title": document.title,
        "file_name": file_name_of(document),
        "source": document.source,
        "file_type": document.file_type,
        "tags": [str(t) for t in tags] if isinstance(tags, list) else [],
        "chunk_count": document.chunk_count,
        "created_at": document.created_at,
        "updated_at": document.updated_at,
    }


def _plain(value: Any) -> bool:
    scalar = (str, int, float, bool)
    return isinstance(value, scalar) or (isinstance(value, list) and all(isinstance(v, scalar) for v in value))


def record(hit: SearchResult, document: Knowledge | None) -> Record:
    fields = document_fields(document) if document is not None else {"document_id": hit.knowledge_id, "knowledge_base_id": hit.knowledge_base_id}
    metadata = {key: value.isoformat() if isinstance(value, datetime) else value for key, value in fields.items()}
    metadata |= {"chunk_id": hit.id, "chunk_index": hit.chunk_index, "chunk_type": hit.chunk_type.value, "match_type": hit.match_type.value}
    title = hit.knowledge_title or (document.title or file_name_of(document) if document is not None else "")
    return Record(content=hit.content, score=min(max(hit.score, 0.0), 1.0), title=title, metadata=metadata)


# --- the filter ---

Test = Callable[[Any], bool]


def _text(value: Any) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value)


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool):
        raise MetadataConditionError(f"{what} needs a number, not {value!r}")
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        raise MetadataConditionError(f"{what} needs a number, not {value!r}") from None


def _number_or_none(value: Any) -> float | None:
    try:
        return _number(value, "")
    except MetadataConditionError:
        return None


def _moment(value: Any, what: str) -> datetime:
    """A date: Unix seconds (what Dify's time metadata holds) or ISO 8601; naive means UTC."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        moment = datetime.fromtimestamp(value, UTC)
    else:
        try:
            moment = datetime.fromtimestamp(float(str(value)), UTC)
        except ValueError:
            try:
                moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
            except ValueError:
                raise MetadataConditionError(f"{what} needs a date (Unix seconds or ISO 8601), not {value!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _moment_or_none(value: Any) -> datetime | None:
    try:
        return _moment(value, "")
    except (MetadataConditionError, OverflowError, OSError):
        return None


def _one_text(value: Any, what: str) -> str:
    if value is None or isinstance(value, list):
        raise MetadataConditionError(f"{what} needs one value")
    return _text(value)


def _equal(expected: Any) -> Test:
    wanted = _number_or_none(expected) if not isinstance(expected, str) else None
    return lambda v: (wanted is not None and _number_or_none(v) == wanted) or _text(v) == _text(expected)


def _compare(op: str, value: Any, what: str) -> Test:
    target = _number(value, what)
    check = {"=": lambda a: a == target, "≠": lambda a: a != target, ">": lambda a: a > target, "<": lambda a: a < target,
             "≥": lambda a: a >= target, "≤": lambda a: a <= target}[op]
    return lambda v: (number := _number_or_none(v)) is not None and check(number)


def _positive_test(op: str, value: Any) -> Test:
    """The test an operator applies to one field value (a list field passes when any element does)."""
    what = f"the operator {op!r}"
    if op in ("contains", "start with", "end with"):
        needle = _one_text(value, what).casefold()
        match = {"contains": lambda s: needle in s, "start with": lambda s: s.startswith(needle), "end with": lambda s: s.endswith(needle)}[op]
        return lambda v: v is not None and match(_text(v).casefold())
    if op == "is":
        return _equal(_one_text(value, what) if isinstance(value, str) else _require(value, what))
    if op == "in":
        choices = value if isinstance(value, list) else [_one_text(value, what)]
        tests = [_equal(choice) for choice in choices]
        return lambda v: v is not None and any(test(v) for test in tests)
    if op in ("=", "≠", ">", "<", "≥", "≤"):
        return _compare(op, _require(value, what), what)
    if op in ("before", "after"):
        moment = _moment(_require(value, what), what)
        return lambda v: (m := _moment_or_none(v)) is not None and (m < moment if op == "before" else m > moment)
    raise AssertionError(op)


def _require(value: Any, what: str) -> Any:
    if value is None or isinstance(value, list):
        raise MetadataConditionError(f"{what} needs one value")
    return value


NEGATIONS = {"not contains": "contains", "is not": "is", "not in": "in", "not empty": "empty"}
POSITIVE = ("contains", "start with", "end with", "is", "in", "empty", "=", "≠", ">", "<", "≥", "≤", "before", "after")
ALIASES = {"!=": "≠", ">=": "≥", "<=": "≤"}  # ASCII spellings a hand-written request may use
OPERATORS = (*POSITIVE, *NEGATIONS)


def _is_empty(value: Any) -> bool:
    return value is None or value == "" or value == []


FieldsTest = Callable[[dict[str, Any]], bool]


@dataclass(frozen=True)
class Filter:
    """A compiled metadata_condition: which documents it keeps."""

    tests: tuple[FieldsTest, ...]
    any_of: bool

    def keeps(self, fields: dict[str, Any]) -> bool:
        results = (test(fields) for test in self.tests)
        return any(results) if self.any_of else all(results)

    def documents(self, documents: Sequence[Knowledge]) -> list[Knowledge]:
        return [d for d in documents if self.keeps(document_fields(d))]


def _condition_test(condition: Condition) -> FieldsTest:
    """A condition holds (before negation) when any named field, or any element of a list field, passes."""
    op = ALIASES.get(condition.comparison_operator.strip(), condition.comparison_operator.strip())
    if op not in OPERATORS:
        raise MetadataConditionError(
            f"comparison_operator {condition.comparison_operator!r} is not supported; use one of: {', '.join(OPERATORS)}")
    positive = NEGATIONS.get(op, op)
    names = (condition.name,) if isinstance(condition.name, str) else tuple(condition.name)
    if positive == "empty":
        def holds(fields: dict[str, Any]) -> bool:
            return all(_is_empty(fields.get(name)) for name in names)
    else:
        one = _positive_test(positive, condition.value)

        def holds(fields: dict[str, Any]) -> bool:
            values = (fields.get(name) for name in names)
            return any(any(one(item) for item in v) if isinstance(v, list) else one(v) for v in values)
    if op in NEGATIONS:
        return lambda fields: not holds(fields)
    return holds


def compile_filter(condition: MetadataCondition | None) -> Filter | None:
    """The filter, or None when there is nothing to filter; MetadataConditionError for a condition
    Ragline cannot evaluate (checked before any search runs)."""
    if condition is None or not condition.conditions:
        return None
    return Filter(tuple(_condition_test(c) for c in condition.conditions), any_of=condition.logical_operator == "or")


def search_pool(top_k: int, post_filtered: bool) -> int:
    """How many hits the rerank chain keeps: top_k, or the most it may when a filter too wide to
    scope the search by documents is applied after it."""
    return min(MAX_TOP_K, defaults.MAX_RETRIEVAL_POOL_SIZE) if post_filtered else top_k
