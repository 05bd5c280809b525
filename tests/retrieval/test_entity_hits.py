"""The entity graph search as a retrieval service: its time limit, whoever calls it (stage or tool)."""

from __future__ import annotations

import asyncio

import pytest

from ragline import defaults
from ragline.contracts.access import Principal
from ragline.entities.types import Namespace
from ragline.retrieval.entity_hits import namespaces_of, search_entity_graph
from ragline.retrieval.scope import DocumentScope


class _HangingGraph:
    """A graph server that accepted the query and never answers (fault injection)."""

    async def search(self, namespaces, entities):
        await asyncio.sleep(3600)


async def test_a_graph_that_does_not_answer_is_given_up_after_the_limit(monkeypatch):
    monkeypatch.setattr(defaults, "ENTITY_SEARCH_TIMEOUT_S", 0.05)
    with pytest.raises(TimeoutError, match="did not answer within 0.05 s"):
        await search_entity_graph(_HangingGraph(), None, DocumentScope({"kb": None}), ["Aurora"], Principal("default", "default"))


def test_a_whole_base_is_one_namespace_and_a_scoped_target_one_per_document():
    scope = DocumentScope({"kb1": None, "kb2": {"d2", "d1"}})
    assert namespaces_of(scope) == [Namespace("kb1"), Namespace("kb2", "d1"), Namespace("kb2", "d2")]
