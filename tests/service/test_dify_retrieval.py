"""Dify's metadata_condition over Ragline documents: every operator of the specification."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ragline.retrieval.types import Knowledge
from ragline.service.dify_retrieval import OPERATORS, MetadataCondition, MetadataConditionError, compile_filter

DOCS = [
    Knowledge(id="a", knowledge_base_id="kb", tenant_id="t", title="Warranty", source="upload:warranty.pdf", file_type="pdf",
              chunk_count=3, created_at=datetime(2024, 1, 1, tzinfo=UTC), metadata={"tags": ["billing", "legal"], "pages": 12}),
    Knowledge(id="b", knowledge_base_id="kb", tenant_id="t", title="Descaling guide", source="text:123", file_type="md",
              chunk_count=1, created_at=datetime(2025, 6, 1, tzinfo=UTC)),
]


def kept(*conditions: dict, logical: str = "and") -> list[str]:
    keep = compile_filter(MetadataCondition.model_validate({"logical_operator": logical, "conditions": list(conditions)}))
    assert keep is not None
    return [d.id for d in keep.documents(DOCS)]


@pytest.mark.parametrize(("condition", "expected"), [
    ({"name": "title", "comparison_operator": "contains", "value": "guide"}, ["b"]),
    ({"name": "title", "comparison_operator": "not contains", "value": "GUIDE"}, ["a"]),
    ({"name": "file_name", "comparison_operator": "start with", "value": "warr"}, ["a"]),
    ({"name": "source", "comparison_operator": "end with", "value": ":123"}, ["b"]),
    ({"name": "file_type", "comparison_operator": "is", "value": "md"}, ["b"]),
    ({"name": "file_type", "comparison_operator": "is not", "value": "md"}, ["a"]),
    ({"name": "file_type", "comparison_operator": "in", "value": ["pdf", "docx"]}, ["a"]),
    ({"name": "file_type", "comparison_operator": "not in", "value": ["pdf", "docx"]}, ["b"]),
    ({"name": "tags", "comparison_operator": "empty"}, ["b"]),
    ({"name": "tags", "comparison_operator": "not empty"}, ["a"]),
    ({"name": "tags", "comparison_operator": "is", "value": "legal"}, ["a"]),
    ({"name": "chunk_count", "comparison_operator": "=", "value": 3}, ["a"]),
    ({"name": "chunk_count", "comparison_operator": "≠", "value": 3}, ["b"]),
    ({"name": "pages", "comparison_operator": ">", "value": "10"}, ["a"]),
    ({"name": "chunk_count", "comparison_operator": "<", "value": 3}, ["b"]),
    ({"name": "chunk_count", "comparison_operator": "≥", "value": 1}, ["a", "b"]),
    ({"name": "chunk_count", "comparison_operator": "≤", "value": 1}, ["b"]),
    ({"name": "chunk_count", "comparison_operator": ">=", "value": 3}, ["a"]),
    ({"name": "created_at", "comparison_operator": "before", "value": "2025-01-01"}, ["a"]),
    ({"name": "created_at", "comparison_operator": "after", "value": int(datetime(2025, 1, 1, tzinfo=UTC).timestamp())}, ["b"]),
    ({"name": ["title", "file_name"], "comparison_operator": "contains", "value": "warranty.pdf"}, ["a"]),
])
def test_each_operator_keeps_the_documents_it_names(condition, expected):
    assert kept(condition) == expected


def test_the_table_covers_every_operator():
    covered = {"contains", "not contains", "start with", "end with", "is", "is not", "in", "not in", "empty", "not empty",
               "=", "≠", ">", "<", "≥", "≤", "before", "after"}
    assert set(OPERATORS) == covered  # the specification's list, no more and no less


def test_and_or():
    pdf = {"name": "file_type", "comparison_operator": "is", "value": "pdf"}
    guide = {"name": "title", "comparison_operator": "contains", "value": "guide"}
    assert kept(pdf, guide) == []
    assert kept(pdf, guide, logical="or") == ["a", "b"]


@pytest.mark.parametrize("condition", [
    {"name": "title", "comparison_operator": "like", "value": "x"},
    {"name": "title", "comparison_operator": "contains", "value": ["a", "b"]},
    {"name": "chunk_count", "comparison_operator": ">", "value": "three"},
    {"name": "created_at", "comparison_operator": "after", "value": "last week"},
])
def test_a_condition_that_cannot_be_evaluated_is_refused_before_any_search(condition):
    with pytest.raises(MetadataConditionError):
        compile_filter(MetadataCondition.model_validate({"conditions": [condition]}))


def test_a_documents_file_name_comes_from_its_source():
    from ragline.service.dify_retrieval import file_name_of

    def named(source: str) -> str:
        return file_name_of(Knowledge(id="x", knowledge_base_id="kb", tenant_id="t", title="x", source=source))

    assert named("upload:manual v2.pdf") == "manual v2.pdf"
    assert named("sample_kb/specs.md") == "specs.md"
    assert named("text:0123abcd") == ""
