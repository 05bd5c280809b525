"""Failing providers degrade a real graph run as the seed says, over the real litellm path.

A knowledge base embedded by the scripted server's embeddings; chat, rewrite, rerank and
embeddings all answered (or refused) by the scripted loopback server:
- rerank fails -> the turn goes on with the search scores (rerank.go: "откат к исходным
  результатам поиска и продолжение конвейера");
- rewrite fails -> the original question is searched, intent empty (= search);
- generation fails or stalls -> one terminal error event, then complete; no stack trace;
- the question cannot be embedded -> one clear retrieval error event, then complete.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from ragline.checkpoints.savers import memory_saver
from ragline.contracts.context import RunContext, RunHost
from ragline.contracts.events import ResponseType, StreamResponse
from ragline.contracts.request import PipelineRequest
from ragline.graph.graphs import build_graph
from ragline.graph.turn import stream_turn
from ragline.ingestion.service import IngestionService, TextDocument
from ragline.models.embeddings import Embedder, EmbeddingCache
from ragline.models.retry import RetryPolicy
from ragline.retrieval.config import RetrievalConfig
from ragline.retrieval.stack import RetrievalStack
from ragline.services import Services
from ragline.settings import get_settings
from tests.scripted_model import Reply

FAST = RetryPolicy(retries=2, base_s=0.01, max_s=0.02)
PAGES = {
    "pairing": "Pairing the Aurora sensor takes about two minutes after holding the button.",
    "battery": "The Aurora sensor uses two AA lithium batteries that last a year.",
    "mounting": "Mount the Aurora sensor two meters above the ground, away from walls.",
}
QUESTION = "How long does pairing the Aurora sensor take?"


def is_rewrite(body: dict) -> bool:
    return "rewrite_query" in body["messages"][0]["content"]


def is_answer(body: dict) -> bool:
    return not is_rewrite(body)


@pytest.fixture
def providers(scripted_model, monkeypatch: pytest.MonkeyPatch):
    """Every remote model on the scripted server, fast retries, rewrite through the model."""
    for name, value in {"RERANK_MODEL": "cohere/scripted-rerank", "RERANK_API_BASE": scripted_model.root_url, "RERANK_API_KEY": "k",
                        "FIRST_TURN_INTENT": "model", "PROVIDER_RETRY_BASE_S": "0.01", "PROVIDER_RETRY_MAX_S": "0.02",
                        "CHAT_TIMEOUT_S": "1"}.items():
        monkeypatch.setenv(f"RAGLINE_{name}", value)
    get_settings.cache_clear()
    yield scripted_model
    get_settings.cache_clear()


@pytest.fixture
def knowledge(providers, tmp_path):
    embedder = Embedder("openai/scripted-embed", api_base=providers.base_url, api_key="k", retry=FAST,
                        cache=EmbeddingCache(tmp_path / "cache.sqlite"))
    stack = RetrievalStack.build(tmp_path, embedder, RetrievalConfig(redis_url=None, chroma_url=None))
    kb = stack.knowledge_bases.create("manual")
    asyncio.run(IngestionService(stack).ingest_documents(kb.id, [TextDocument(text=t, title=k, source=k) for k, t in PAGES.items()]))
    return embedder, stack, kb


async def ask(knowledge, query: str = QUESTION, *, rerank: bool = True) -> list[StreamResponse]:
    embedder, stack, kb = knowledge
    settings = get_settings() if rerank else get_settings().model_copy(update={"rerank_model": None})
    services = Services(settings, embedder_factory=lambda: embedder, retrieval_factory=lambda: stack)
    request = PipelineRequest(query=query, knowledge_base_ids=[kb.id], relevance_gate_enabled=False)
    graph = build_graph("ragline", checkpointer=memory_saver())
    return await asyncio.wait_for(_collect(graph, request, services), 30)  # a hang fails here, not the suite


async def _collect(graph, request, services) -> list[StreamResponse]:
    return [event async for event in stream_turn(graph, request, RunContext(host=RunHost(services=services)))]


def of(events: list[StreamResponse], kind: ResponseType) -> list[StreamResponse]:
    return [e for e in events if e.response_type == kind]


def reference_sources(events: list[StreamResponse]) -> list[str]:
    return [r["title"] for e in of(events, ResponseType.REFERENCES) for r in e.knowledge_references]


def ends_cleanly(events: list[StreamResponse]) -> bool:
    """complete last, and nothing a client sees carries a stack trace."""
    return events[-1].response_type == ResponseType.COMPLETE and not any("Traceback" in (e.content or "") for e in events)


def rewrite_to(query: str) -> Reply:
    return Reply.text(json.dumps({"rewrite_query": query, "intent": "kb_search"}))


async def test_a_failing_reranker_falls_back_to_the_search_order(knowledge, providers):
    providers.on(is_rewrite, rewrite_to(QUESTION))
    providers.on(is_answer, Reply.text("About two minutes."))
    providers.on_rerank(Reply(status=503, error="rerank down"))
    degraded = await ask(knowledge)
    assert len(providers.rerank_requests) == 3  # tried, retried, then given up
    assert "".join(e.content for e in of(degraded, ResponseType.ANSWER)).startswith("About two minutes.")  # + its source tag
    assert of(degraded, ResponseType.ERROR) == [] and ends_cleanly(degraded)
    assert reference_sources(degraded) == reference_sources(await ask(knowledge, rerank=False))


async def test_a_working_reranker_does_reorder_the_references(knowledge, providers):
    """The counterpart of the fallback test: with the model's scores the order is the model's."""
    providers.on(is_rewrite, rewrite_to(QUESTION))
    search_order = reference_sources(await ask(knowledge, rerank=False))
    providers.on_rerank(Reply(scores=[0.3] * (len(search_order) - 1) + [1.0]))  # the model prefers the search's last hit
    reranked = reference_sources(await ask(knowledge))
    assert reranked[0] == search_order[-1] != search_order[0]


@pytest.mark.parametrize("reply", [Reply(status=503), Reply(raw="{not json"), Reply.text("no json at all", delay=3)],
                         ids=["503", "malformed JSON", "timeout"])
async def test_a_failing_rewrite_searches_the_original_question(knowledge, providers, reply):
    providers.on(is_rewrite, reply)
    providers.on(is_answer, Reply.text("About two minutes."))
    events = await ask(knowledge)
    answer_call = [body for body in providers.requests if is_answer(body)][-1]
    assert answer_call["messages"][-1]["content"].endswith(QUESTION) or QUESTION in json.dumps(answer_call["messages"])
    assert "pairing" in reference_sources(events)
    assert of(events, ResponseType.ERROR) == [] and ends_cleanly(events)
    rewrites = [body for body in providers.requests if is_rewrite(body)]
    assert len(rewrites) == (3 if "503" in str(reply.status) else 2)  # a 5xx is retried; a bad reply tries plain output once


@pytest.mark.parametrize("reply", [Reply(status=500, error="upstream exploded"), Reply(status=429, headers={"Retry-After": "0"}),
                                   Reply(chunks=["About ", "two ", "min"], chunk_delay=3), Reply(chunks=["About ", "two"], cut_after=1)],
                         ids=["500", "429", "stalled stream", "cut stream"])
async def test_a_failing_answer_ends_in_one_error_event_then_complete(knowledge, providers, reply):
    providers.on(is_rewrite, rewrite_to(QUESTION))
    providers.on(is_answer, reply)
    events = await ask(knowledge)
    errors = of(events, ResponseType.ERROR)
    assert len(errors) == 1 and errors[0].done and errors[0].data["code"] == "model_call"
    assert ends_cleanly(events)


async def test_a_question_that_cannot_be_embedded_ends_in_a_clear_retrieval_error(knowledge, providers):
    providers.on(is_rewrite, rewrite_to("a question never embedded before"))
    providers.on_embedding(Reply(status=503, error="embeddings down"))
    before = len(providers.embedding_requests)  # the ingestion's
    events = await ask(knowledge, "a question never embedded before")
    errors = of(events, ResponseType.ERROR)
    assert len(errors) == 1 and errors[0].data["code"] == "retrieval"
    assert "embedding model openai/scripted-embed failed" in errors[0].content and "embeddings down" in errors[0].content
    assert len(providers.embedding_requests) - before == 3 and ends_cleanly(events)
