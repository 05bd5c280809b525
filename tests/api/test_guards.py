"""Hostile bodies and headers get a clear 4xx, never a 500, and the connection stays usable."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from ragline import defaults
from ragline.api.app import ROUTES
from ragline.api.errors import ApiError
from ragline.api.guards import header_problem, loopback_problem
from ragline.api.inputs import decode_json, depth_of
from tests.api.live import new_session

NESTED = b"[" * 100_000 + b"]" * 100_000


async def _json_routes(client: httpx.AsyncClient) -> list[tuple[str, str]]:
    """Every route that takes a JSON body, with real ids so each reaches its body."""
    sid = await new_session(client)
    kb = (await client.post("/api/v1/knowledge-bases", json={"name": "limits-kb"})).json()["id"]
    ids = {"session_id": sid, "kb_id": kb, "document_id": "missing", "message_id": "missing", "memory_id": "missing", "job_id": "missing", "assistant_id": "missing"}
    routes = []
    for route in ROUTES:
        for method in sorted((route.methods or set()) & {"POST", "PATCH"}):
            if route.path.endswith(("/documents", "/faq/import", "/reparse", "/wiki/rebuild")):
                continue  # multipart uploads, or no body at all
            routes.append((method, route.path.format(**ids)))
    return routes


async def test_deeply_nested_json_is_a_400_on_every_json_route_and_the_connection_survives(client):
    routes = await _json_routes(client)
    assert len(routes) >= 14
    for method, url in routes:
        response = await client.request(method, url, content=NESTED, headers={"content-type": "application/json"})
        assert 400 <= response.status_code < 500, (method, url, response.status_code, response.text[:200])
        assert (await client.get("/health")).status_code == 200  # the same connection still answers


async def test_a_body_declared_too_large_is_refused_before_it_is_read(client):
    sid = await new_session(client)
    url = httpx.URL(str(client.base_url))
    reader, writer = await asyncio.open_connection(url.host, url.port)
    head = (f"POST /api/v1/sessions/{sid}/chat HTTP/1.1\r\nHost: {url.host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {defaults.JSON_BODY_MAX_BYTES + 1}\r\n\r\n")
    writer.write(head.encode())  # the body never comes: the refusal must not wait for it
    await writer.drain()
    status_line = await asyncio.wait_for(reader.readline(), 10)
    writer.close()
    assert status_line.split()[1] == b"413"


async def test_a_streamed_body_is_cut_off_at_the_limit(client):
    sid = await new_session(client)

    async def chunks():
        for _ in range(20):
            yield b" " * 100_000  # 2 MB in all, no Content-Length

    response = await client.post(f"/api/v1/sessions/{sid}/chat", content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 413 and "larger than" in response.json()["error"]["message"]


@pytest.mark.parametrize("headers", [
    {"x-big": "a" * (defaults.HEADER_MAX_BYTES + 1)},
    {f"x-h{i}": "v" for i in range(defaults.HEADERS_MAX_COUNT + 1)},
])
async def test_oversized_or_too_many_headers_are_a_431(client, headers):
    response = await client.get("/api/v1/sessions", headers=headers)
    assert response.status_code == 431 and response.json()["error"]["code"] == "headers_too_large"


def test_the_depth_check_counts_containers_only():
    assert depth_of({"a": [1, {"b": "x"}]}, 10) == 3
    assert depth_of("scalar", 10) == 0
    with pytest.raises(ApiError, match="nests deeper"):
        decode_json(b"[" * (defaults.JSON_MAX_DEPTH + 1) + b"]" * (defaults.JSON_MAX_DEPTH + 1))
    assert decode_json(b"[" * defaults.JSON_MAX_DEPTH + b"]" * defaults.JSON_MAX_DEPTH) is not None


def test_header_limits_hold_at_their_edges():
    assert header_problem([(b"a", b"v" * (defaults.HEADER_MAX_BYTES - 1))]) is None
    assert header_problem([(b"a", b"v" * defaults.HEADER_MAX_BYTES)]) is not None
    assert header_problem([(b"h", b"v")] * defaults.HEADERS_MAX_COUNT) is None


async def test_a_text_plain_body_is_not_taken_as_json(client):
    response = await client.post("/api/v1/sessions", content=b'{"title": "csrf"}', headers={"content-type": "text/plain"})
    assert response.status_code == 415


async def test_dev_mode_refuses_a_foreign_origin_and_a_foreign_host(client):
    evil = await client.post("/api/v1/sessions", json={"title": "x"}, headers={"origin": "http://evil.example"})
    assert evil.status_code == 403 and "cross-site" in evil.json()["error"]["message"]
    rebound = await client.get("/api/v1/sessions", headers={"host": "attacker.example:8000"})
    assert rebound.status_code == 403
    local = await client.post("/api/v1/sessions", json={"title": "ok"}, headers={"origin": "http://127.0.0.1:8000"})
    assert local.status_code == 201


def test_only_loopback_names_pass_the_dev_mode_guard():
    ok = [(b"host", b"localhost:8000"), (b"origin", b"http://localhost:8000")]
    assert loopback_problem(ok) is None
    assert loopback_problem([(b"host", b"[::1]:8000")]) is None
    assert loopback_problem([(b"host", b"127.0.0.1.evil.example")]) is not None
    assert loopback_problem([(b"host", b"127.0.0.1"), (b"origin", b"null")]) is not None


async def test_the_service_echoes_a_request_id(client):
    given = await client.get("/api/v1/sessions", headers={"x-request-id": "trace-123"})
    assert given.headers["x-request-id"] == "trace-123"
    assert len((await client.get("/api/v1/sessions")).headers["x-request-id"]) == 32
