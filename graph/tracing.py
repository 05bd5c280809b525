"""OpenTelemetry spans: one per turn, one per graph stage inside it, with the stage's timing.

The seed wraps every stage in a Langfuse span (`pipeline.<event_type>`); here each LangGraph
node run becomes a span `pipeline.<node>` under a `ragline.turn` span, made by a LangChain
callback handler that the turn driver adds to the run's config. A progress card (a subgraph,
graph/cards.py) is a span `card.<name>` holding the spans of its stages. Nothing else changes:
nodes know nothing of tracing.

Off by default, at the cost of one attribute check per turn: spans are made only after
`configure_from_env` found an exporter (or a test called `enable`). Exporters:
- OTLP/HTTP at the standard `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`); the
  exporter reads the other standard OTEL_EXPORTER_OTLP_* variables (headers, timeout) itself;
- Langfuse, when `LANGFUSE_PUBLIC_KEY` and `LANGFUSE_SECRET_KEY` are set: Langfuse accepts OTLP
  at `<LANGFUSE_HOST>/api/public/otel/v1/traces` with basic auth, so no Langfuse SDK is needed.
The provider is Ragline's own (not the process-global one), so an embedding application's
tracing setup is neither overridden nor overriding.
"""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import RunnableConfig

from ragline.logs import bind_log_ids

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span

    from ragline.contracts.context import RunContext

TRACER_NAME = "ragline"
LANGFUSE_DEFAULT_HOST = "https://cloud.langfuse.com"
_provider: TracerProvider | None = None


def enable(provider: TracerProvider) -> None:
    """Trace turns into `provider` from now on."""
    global _provider
    _provider = provider


def disable() -> None:
    global _provider
    _provider = None


def enabled() -> bool:
    return _provider is not None


def langfuse_exporter_args(env: Mapping[str, str]) -> dict[str, Any] | None:
    """The OTLP exporter's endpoint and headers for Langfuse, or None without its keys."""
    public, secret = env.get("LANGFUSE_PUBLIC_KEY"), env.get("LANGFUSE_SECRET_KEY")
    if not (public and secret):
        return None
    host = (env.get("LANGFUSE_HOST") or env.get("LANGFUSE_BASE_URL") or LANGFUSE_DEFAULT_HOST).rstrip("/")
    token = base64.b64encode(f"{public}:{secret}".encode()).decode()
    return {"endpoint": f"{host}/api/public/otel/v1/traces", "headers": {"Authorization": f"Basic {token}"}}


def configure_from_env(env: Mapping[str, str] | None = None, service_name: str = "ragline") -> bool:
    """Turn tracing on when an OTLP endpoint or Langfuse keys are configured; True if it is on."""
    env = os.environ if env is None else env
    otlp = bool(env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
    langfuse = langfuse_exporter_args(env)
    if not (otlp or langfuse):
        return False
    # imported only when on: the SDK and the exporter cost import time the default never pays
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": env.get("OTEL_SERVICE_NAME") or service_name}))
    if otlp:
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))  # endpoint and headers from the env
    if langfuse:
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(**langfuse)))
    enable(provider)
    return True


def shutdown() -> None:
    """Flush spans still batched (at process exit) and stop tracing."""
    if _provider is not None:
        _provider.shutdown()
    disable()


def traced(config: RunnableConfig, context: RunContext, graph_name: str = "") -> RunnableConfig:
    """The run's config with the span-making callback added when tracing is on (else unchanged)."""
    if _provider is None:
        return config
    handler = StageSpans(_provider, context, graph_name)
    callbacks = config.get("callbacks")
    if callbacks is None:
        merged: Any = [handler]
    elif isinstance(callbacks, list):
        merged = [*callbacks, handler]
    else:  # a callback manager: it takes handlers of its own
        merged = callbacks.copy()
        merged.add_handler(handler, inherit=True)
    return {**config, "callbacks": merged}


class StageSpans(BaseCallbackHandler):
    """LangGraph's chain callbacks as spans: the graph run is the turn, each node run a stage."""

    run_inline = True  # called on the event loop, in order, not in a thread pool

    def __init__(self, provider: TracerProvider, context: RunContext, graph_name: str = "") -> None:
        self.tracer = provider.get_tracer(TRACER_NAME)
        self.ids = {"session.id": context.session_id, "ragline.request_id": context.request_id,
                    "ragline.message_id": context.assistant_message_id, "ragline.tenant": context.tenant_id}
        self.graph_name = graph_name
        self.turn: Span | None = None
        self.turn_run: UUID | None = None
        self.turn_started = 0.0
        self.stages: dict[UUID, tuple[Span, float]] = {}
        self.stage_names: dict[UUID, str] = {}
        self.span_of: dict[UUID, Span | None] = {}  # each run's nearest span: its own stage's, a card's, or the turn's

    def _start(self, name: str, attributes: dict[str, Any], under: Span | None) -> Span:
        from opentelemetry import trace

        parent = trace.set_span_in_context(under) if under is not None else None
        return self.tracer.start_span(name, context=parent, attributes={**self.ids, **attributes})

    def on_chain_start(self, serialized: dict[str, Any] | None, inputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None,
                       tags: list[str] | None = None, metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        metadata = metadata or {}
        name = kwargs.get("name") or ""
        if self.turn is None:  # the first chain is the graph itself
            self.turn_run, self.turn_started = run_id, time.perf_counter()
            self.turn = self._start("ragline.turn", {"ragline.graph": self.graph_name or name}, None)
            # the turn's spans are never current, so logs learn its trace id as a log id (ragline/logs.py);
            # called inline in the run's task, before it starts the node tasks that inherit it
            bind_log_ids(trace_id=format(self.turn.get_span_context().trace_id, "032x"))
            return
        node = metadata.get("langgraph_node")
        under = self.span_of.get(parent_run_id) if parent_run_id is not None else None
        if node is None or name != node or "langgraph:hidden" in (tags or []):
            self.span_of[run_id] = under or self.turn  # a router, a channel write or a runnable inside a node: not a stage
            return
        if parent_run_id is not None and self.stage_names.get(parent_run_id) == node:
            card = self.stages[parent_run_id][0]  # the node runs a subgraph of its own name: a card, its stages inside
            card.update_name(f"card.{node}")
            card.set_attribute("ragline.card", True)
            self.span_of[run_id] = card
            return
        span = self._start(f"pipeline.{node}", {"ragline.stage": node, "ragline.step": int(metadata.get("langgraph_step", -1))},
                           under or self.turn)
        self.stages[run_id] = (span, time.perf_counter())
        self.stage_names[run_id] = node
        self.span_of[run_id] = span

    def _end(self, run_id: UUID, error: BaseException | None = None) -> None:
        from opentelemetry.trace import Status, StatusCode

        if run_id == self.turn_run and self.turn is not None:
            for span, started in self.stages.values():  # a cancelled run leaves stages open: close them
                self._close(span, started)
            self.stages.clear()
            self.stage_names.clear()
            self.span_of.clear()
            self._close_turn(error)
            return
        entry = self.stages.pop(run_id, None)
        if entry is not None:
            span, started = entry
            if error is not None and not _is_control_flow(error):
                span.record_exception(error)
                span.set_status(Status(StatusCode.ERROR, str(error)[:200]))
            self._close(span, started)

    @staticmethod
    def _close(span: Span, started: float) -> None:
        """End a span with its duration as an attribute too (Langfuse and log queries read attributes)."""
        span.set_attribute("ragline.duration_ms", round((time.perf_counter() - started) * 1000, 3))
        span.end()

    def _close_turn(self, error: BaseException | None) -> None:
        from opentelemetry.trace import Status, StatusCode

        assert self.turn is not None
        if error is not None and not _is_control_flow(error):
            self.turn.record_exception(error)
            self.turn.set_status(Status(StatusCode.ERROR, str(error)[:200]))
        self._close(self.turn, self.turn_started)
        self.turn = None

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, error)


def _is_control_flow(error: BaseException) -> bool:
    """LangGraph's interrupts and parent commands travel as exceptions; they are not failures."""
    from langgraph.errors import GraphBubbleUp

    return isinstance(error, GraphBubbleUp)
