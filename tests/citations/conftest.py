"""Shared search results for the citations tests: two document chunks, one FAQ, one web page."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ragline.citations import Registry, SourceChunk

GUIDE_CHUNK_ID = "0b9a3f4e-1111-4222-8333-944445555666"
GUIDE_KNOWLEDGE_ID = "5d1c2b3a-aaaa-4bbb-8ccc-dddd00001111"
POLICY_CHUNK_ID = "7e6f5a4b-2222-4333-8444-955556666777"
POLICY_KNOWLEDGE_ID = "6e2d3c4b-bbbb-4ccc-8ddd-eeee00002222"
FAQ_CHUNK_ID = "9f8e7d6c-3333-4444-8555-a66667777888"
FAQ_KNOWLEDGE_ID = "7f3e4d5c-cccc-4ddd-8eee-ffff00003333"
KNOWLEDGE_BASE_ID = "1a2b3c4d-0000-4000-8000-000000000001"
WEB_URL = "https://example.com/releases#v2"


def sample_results() -> list[SourceChunk]:
    """Merged order: guide, policy, FAQ, web (the FAQ is *not* first until FAQ priority)."""
    return [
        SourceChunk(
            chunk_id=GUIDE_CHUNK_ID,
            knowledge_id=GUIDE_KNOWLEDGE_ID,
            knowledge_base_id=KNOWLEDGE_BASE_ID,
            title="Install guide",
            content="Run the installer. Diagram: minio://docs/install.png.",
            score=0.82,
            match_type="vector",
        ),
        SourceChunk(
            chunk_id=POLICY_CHUNK_ID,
            knowledge_id=POLICY_KNOWLEDGE_ID,
            knowledge_base_id=KNOWLEDGE_BASE_ID,
            title="Refund policy",
            content="Refunds within 30 days.",
            score=0.74,
            match_type="keyword",
        ),
        SourceChunk(
            chunk_id=FAQ_CHUNK_ID,
            knowledge_id=FAQ_KNOWLEDGE_ID,
            knowledge_base_id=KNOWLEDGE_BASE_ID,
            title="How do I reset my password?",
            content="Use the 'Forgot password' link.",
            chunk_type="faq",
            score=1.1,
            base_score=0.93,
            match_type="vector",
        ),
        SourceChunk(
            chunk_id=WEB_URL,
            source="web_search",
            chunk_type="web_search",
            title="Release notes",
            content="Version 2 ships today.",
            score=0.6,
        ),
    ]


@pytest.fixture
def results() -> list[SourceChunk]:
    return sample_results()


@pytest.fixture
def registry(results: list[SourceChunk]) -> Registry:
    """Citations on, results registered without FAQ priority: c1 guide, c2 policy, c3 FAQ, w1 web."""
    registry = Registry()
    registry.render_context(results)
    return registry


@pytest.fixture(scope="module")
def decoding_registry() -> Registry:
    """The same registry, built once per module for property tests (decoding never mutates it)."""
    registry = Registry()
    registry.render_context(sample_results())
    return registry


@pytest.fixture(scope="session")
def ids() -> SimpleNamespace:
    """The durable ids of `sample_results`, for assertions."""
    return SimpleNamespace(
        guide_chunk=GUIDE_CHUNK_ID,
        guide_knowledge=GUIDE_KNOWLEDGE_ID,
        policy_chunk=POLICY_CHUNK_ID,
        policy_knowledge=POLICY_KNOWLEDGE_ID,
        faq_chunk=FAQ_CHUNK_ID,
        faq_knowledge=FAQ_KNOWLEDGE_ID,
        knowledge_base=KNOWLEDGE_BASE_ID,
        web_url=WEB_URL,
    )


@pytest.fixture(scope="session")
def expected_tags() -> dict[str, str]:
    """The oracle, written out by hand rather than through kb_tag(): what the front end receives."""
    return {
        "c1": (
            f'<kb chunk_id="{GUIDE_CHUNK_ID}" knowledge_id="{GUIDE_KNOWLEDGE_ID}" '
            f'knowledge_base_id="{KNOWLEDGE_BASE_ID}" title="Install guide" chunk_type="text"/>'
        ),
        "c2": (
            f'<kb chunk_id="{POLICY_CHUNK_ID}" knowledge_id="{POLICY_KNOWLEDGE_ID}" '
            f'knowledge_base_id="{KNOWLEDGE_BASE_ID}" title="Refund policy" chunk_type="text"/>'
        ),
        "c3": (
            f'<kb chunk_id="{FAQ_CHUNK_ID}" knowledge_id="{FAQ_KNOWLEDGE_ID}" '
            f'knowledge_base_id="{KNOWLEDGE_BASE_ID}" title="How do I reset my password?" chunk_type="faq"/>'
        ),
        "w1": f'<web url="{WEB_URL}" title="Release notes"/>',
    }
