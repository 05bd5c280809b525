"""/metrics: Prometheus text with requests by endpoint and status, latency, and open answer streams."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.api.live import collect, new_session
from tests.scripted_model import Reply


def _samples(text: str) -> dict[tuple[str, frozenset], float]:
    return {(s.name, frozenset(s.labels.items())): s.value for family in text_string_to_metric_families(text) for s in family.samples}


async def test_requests_are_counted_by_endpoint_and_status_and_streams_are_timed(client, scripted_model):
    scripted_model.on(lambda b: True, Reply.text("Counted."))
    sid = await new_session(client)
    await collect(client, "POST", f"/api/v1/sessions/{sid}/chat", json={"query": "hi", "rewrite_enabled": False})
    await client.get("/api/v1/sessions/no-such-session")
    response = await client.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    samples = _samples(response.text)
    assert samples[("ragline_http_requests_total", frozenset({("method", "POST"), ("route", "chat"), ("status", "200")}))] >= 1
    assert samples[("ragline_http_requests_total", frozenset({("method", "GET"), ("route", "get_session"), ("status", "404")}))] >= 1
    assert samples[("ragline_http_request_seconds_count", frozenset({("method", "POST"), ("route", "chat")}))] >= 1
    assert samples[("ragline_open_streams", frozenset())] == 0  # the stream ended, the gauge came back down
    assert not [key for key in samples if sid in str(key)]  # ids never become labels


def _retries(text: str) -> dict[tuple[str, str], float]:
    return {(s.labels["kind"], s.labels["outcome"]): s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == "ragline_provider_retries_total"}


def _grew(before: dict[tuple[str, str], float], after: dict[tuple[str, str], float]) -> dict[tuple[str, str], float]:
    return {key: after[key] - before.get(key, 0.0) for key in after if after[key] != before.get(key, 0.0)}


async def test_a_chat_retry_that_recovered_is_counted_once_by_kind_and_outcome(client, scripted_model):
    before = _retries((await client.get("/metrics")).text)
    scripted_model.on(lambda b: bool(b.get("stream")), Reply(status=429, headers={"Retry-After": "0"}), times=1)  # the answer, not the title
    scripted_model.on(lambda b: True, Reply.text("After one retry."))
    sid = await new_session(client)
    await collect(client, "POST", f"/api/v1/sessions/{sid}/chat", json={"query": "hi", "rewrite_enabled": False})
    after = _retries((await client.get("/metrics")).text)
    assert _grew(before, after) == {("chat", "recovered"): 1}
    assert {kind for kind, _ in after} == {"chat", "embedding", "rerank"}  # every series exists from the start, at 0


async def test_embedding_and_rerank_retries_count_what_became_of_each_retry(client, scripted_model):
    from ragline.models.embeddings import Embedder
    from ragline.models.rerank import Reranker, RerankError
    from ragline.models.retry import RetryPolicy

    now = RetryPolicy(retries=2, base_s=0.0, max_s=0.0)
    before = _retries((await client.get("/metrics")).text)
    scripted_model.on_embedding(Reply(status=500), times=1)
    await Embedder("openai/scripted-embed", api_base=scripted_model.base_url, api_key="k", retry=now).embed_query("q")
    scripted_model.on_rerank(Reply(status=502))
    with pytest.raises(RerankError):
        await Reranker("cohere/scripted-rerank", api_base=scripted_model.root_url, api_key="k", retry=now).rerank("q", ["a"])
    after = _retries((await client.get("/metrics")).text)
    assert _grew(before, after) == {("embedding", "recovered"): 1, ("rerank", "retried_again"): 1, ("rerank", "gave_up"): 1}
