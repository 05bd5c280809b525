"""One OpenTelemetry span per graph stage of a real run, under one span per turn.

The SDK's InMemorySpanExporter collects the spans of a real `ragline` graph turn (a knowledge base
searched, the scripted model answering); a loopback HTTP server stands in for Langfuse's OTLP
endpoint to check what an exporter configured from the environment sends, and how it signs in.
"""

from __future__ import annotations

import asyncio
import base64
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ragline.checkpoints.savers import memory_saver
from ragline.contracts.context import RunContext, RunHost
from ragline.contracts.request import PipelineRequest
from ragline.graph import tracing
from ragline.graph.graphs import build_graph
from ragline.graph.turn import TurnDriver, stream_turn
from ragline.ingestion.service import IngestionService, TextDocument
from ragline.models.embeddings import Embedder, EmbeddingCache
from ragline.retrieval.config import RetrievalConfig
from ragline.retrieval.stack import RetrievalStack
from ragline.services import Services
from tests.scripted_model import Reply

RAG_STAGES = {"begin_turn", "query_understand", "chunk_search_parallel", "chunk_search", "rerank", "chunk_merge", "filter_top_k",
              "into_chat_message", "chat_completion_stream"}


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.enable(provider)
    yield exporter
    tracing.disable()


@pytest.fixture
def knowledge(scripted_model, tmp_path):
    embedder = Embedder("openai/scripted-embed", api_base=scripted_model.base_url, api_key="k", cache=EmbeddingCache(tmp_path / "cache.sqlite"))
    stack = RetrievalStack.build(tmp_path, embedder, RetrievalConfig(redis_url=None, chroma_url=None))
    kb = stack.knowledge_bases.create("manual")
    asyncio.run(IngestionService(stack).ingest_documents(kb.id, [TextDocument(text="Pairing the Aurora sensor takes two minutes.", title="pairing")]))
    return Services(embedder_factory=lambda: embedder, retrieval_factory=lambda: stack), kb.id


async def _ask(services: Services, kb_id: str, session_id: str = "s-trace") -> None:
    request = PipelineRequest(query="How long does pairing the Aurora sensor take?", knowledge_base_ids=[kb_id], relevance_gate_enabled=False)
    context = RunContext(session_id=session_id, request_id="r-1", assistant_message_id="m-1", host=RunHost(services=services))
    [_ async for _ in stream_turn(build_graph("ragline", checkpointer=memory_saver()), request, context)]


async def test_a_rag_turn_makes_one_span_per_stage_under_the_turn_span(scripted_model, knowledge, spans):
    scripted_model.on(lambda b: True, Reply.text("Two minutes."))
    await _ask(*knowledge)
    finished = spans.get_finished_spans()
    turns = [s for s in finished if s.name == "ragline.turn"]
    stages = [s for s in finished if s.name.startswith("pipeline.")]
    assert len(turns) == 1 and turns[0].parent is None
    names = [s.attributes["ragline.stage"] for s in stages]
    assert set(names) >= RAG_STAGES
    assert len(names) == len(set(names))  # each stage once: no router or inner runnable counted as a stage
    cards = {s.name: s for s in finished if s.name.startswith("card.")}
    assert set(cards) == {"card.query_understand", "card.knowledge_search"}
    assert len(stages) + len(cards) == len(finished) - 1
    parent_of = {s.context.span_id: s.name for s in (*turns, *cards.values())}
    assert all(card.parent.span_id == turns[0].context.span_id for card in cards.values())
    assert {s.attributes["ragline.stage"]: parent_of[s.parent.span_id] for s in stages if s.parent.span_id in parent_of} == {
        name: ("card.query_understand" if name in ("open_query_understand", "query_understand", "extract_entity", "close_query_understand")
               else "card.knowledge_search" if name not in ("begin_turn", "memory_recall", "into_chat_message", "chat_completion_stream")
               else "ragline.turn") for name in names}
    for span in stages:
        assert span.attributes["ragline.duration_ms"] >= 0 and span.name == f"pipeline.{span.attributes['ragline.stage']}"
        assert (span.attributes["session.id"], span.attributes["ragline.request_id"], span.attributes["ragline.message_id"]) == ("s-trace", "r-1", "m-1")


async def test_each_stage_span_covers_the_time_that_stage_ran(scripted_model, knowledge, spans):
    scripted_model.on(lambda b: True, Reply.text("Two minutes."))
    await _ask(*knowledge)
    by_stage = {s.attributes["ragline.stage"]: s for s in spans.get_finished_spans() if s.name.startswith("pipeline.")}
    search, answer = by_stage["chunk_search"], by_stage["chat_completion_stream"]
    assert search.end_time <= answer.start_time  # stages are timed where they ran, not when the callback was flushed


def test_with_tracing_off_the_run_config_is_left_alone():
    tracing.disable()
    driver = TurnDriver(build_graph("chat_stream"), RunContext())
    assert "callbacks" not in driver.config


def test_langfuse_is_reached_over_otlp_with_basic_auth():
    args = tracing.langfuse_exporter_args({"LANGFUSE_PUBLIC_KEY": "pk", "LANGFUSE_SECRET_KEY": "sk", "LANGFUSE_HOST": "https://lf.example/"})
    assert args == {"endpoint": "https://lf.example/api/public/otel/v1/traces",
                    "headers": {"Authorization": "Basic " + base64.b64encode(b"pk:sk").decode()}}
    assert tracing.langfuse_exporter_args({"LANGFUSE_PUBLIC_KEY": "pk"}) is None
    assert not tracing.configure_from_env({}) and not tracing.enabled()


class _Collector(BaseHTTPRequestHandler):
    received: list[tuple[str, dict[str, str], bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.received.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


async def test_spans_configured_from_the_environment_reach_a_langfuse_endpoint(scripted_model, knowledge):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Collector.received = []
    try:
        env = {"LANGFUSE_PUBLIC_KEY": "pk-1", "LANGFUSE_SECRET_KEY": "sk-1", "LANGFUSE_HOST": f"http://127.0.0.1:{server.server_address[1]}"}
        assert tracing.configure_from_env(env)
        await _ask(*knowledge)
        await asyncio.to_thread(tracing.shutdown)  # flushes the batch
    finally:
        tracing.disable()
        server.shutdown()
    path, headers, body = _Collector.received[0]
    assert path == "/api/public/otel/v1/traces"
    assert headers["authorization"] == "Basic " + base64.b64encode(b"pk-1:sk-1").decode()
    assert b"pipeline.chat_completion_stream" in b"".join(b for _, _, b in _Collector.received)
