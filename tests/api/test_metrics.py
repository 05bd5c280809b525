"""/metrics: Prometheus text with requests by endpoint and status, latency, and open answer streams."""

from __future__ import annotations

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
