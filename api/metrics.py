"""Prometheus metrics at /metrics: requests by route and status, their latency, runs and streams,
retries of remote model calls by kind and outcome, and keyed requests the shared limits could not count.

One registry per app (tests build several apps in one process); the retry counts are the
process's (models/retry.py keeps them: model clients know no app), read at each scrape. Route
labels are endpoint names, never raw paths, so ids in URLs cannot blow up the label set.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ragline.api.openapi import doc
from ragline.models.retry import retry_counts
from ragline.service.key_limits import Limiter

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("ragline_http_requests", "HTTP requests by route and status", ("method", "route", "status"),
                                registry=self.registry)
        self.latency = Histogram("ragline_http_request_seconds", "Time to the end of the response (a stream: its whole life)",
                                 ("method", "route"), buckets=LATENCY_BUCKETS, registry=self.registry)
        self.open_streams = Gauge("ragline_open_streams", "Answer streams (SSE responses) open now", registry=self.registry)
        self.runs = Gauge("ragline_runs_active", "Turns this process is running", registry=self.registry)
        self.runs_waiting = Gauge("ragline_runs_waiting_to_start", "Turns waiting for a start slot (a burst of new turns)", registry=self.registry)
        self.registry.register(ProviderRetries())


class ProviderRetries(Collector):
    """ragline_provider_retries_total{kind, outcome}: every retry of a chat, embedding or rerank call, once."""

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily("ragline_provider_retries", "Retries of remote model calls by kind and outcome "
                                     "(recovered, retried_again, gave_up)", labels=("kind", "outcome"))
        for (kind, outcome), count in sorted(retry_counts().items()):
            family.add_metric([kind, outcome], count)
        yield family


class LimitsUncounted(Collector):
    """ragline_key_limits_uncounted_total{limit, reason}: keyed requests let through because the shared
    Redis that counts the key limits did not answer in time ("timeout"), refused the write ("full")
    or could not be reached ("unreachable")."""

    def __init__(self, limiter: Limiter) -> None:
        self.limiter = limiter

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily("ragline_key_limits_uncounted", "Keyed requests let through uncounted because "
                                     "Redis did not count them (timeout, full, unreachable)", labels=("limit", "reason"))
        for (limit, reason), count in sorted(self.limiter.uncounted().items()):
            family.add_metric([limit, reason], count)
        yield family


class MeasureRequests:
    """Counts and times every HTTP request under its endpoint's name."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, status = time.perf_counter(), 500
        streaming = False

        async def observe(message: Message) -> None:
            nonlocal status, streaming
            if message["type"] == "http.response.start":
                status = message["status"]
                content_type = dict(message.get("headers", [])).get(b"content-type", b"")
                streaming = content_type.startswith(b"text/event-stream")
                if streaming:
                    self.metrics.open_streams.inc()
            await send(message)

        try:
            await self.app(scope, receive, observe)
        finally:
            if streaming:
                self.metrics.open_streams.dec()
            endpoint = scope.get("endpoint")
            route = getattr(endpoint, "__name__", "unmatched")
            self.metrics.requests.labels(scope["method"], route, str(status)).inc()
            self.metrics.latency.labels(scope["method"], route).observe(time.perf_counter() - started)


@doc("Prometheus metrics (text exposition format)", "service", public=True, errors=())
async def metrics(request: Request) -> Response:
    collected: Metrics = request.app.state.metrics
    shared = getattr(request.app.state, "host", None)
    if shared is not None:
        collected.runs.set(shared.runs.local_runs())
        collected.runs_waiting.set(shared.runs.start_slots.waiting)
    return Response(generate_latest(collected.registry), media_type=CONTENT_TYPE_LATEST)
