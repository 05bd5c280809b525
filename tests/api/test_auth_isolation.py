"""API keys -> tenants: no key no access, and tenant B reaches nothing of tenant A's through any route."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from ragline.api.app import ROUTES, create_app
from tests.api.live import ThreadServer, collect, memory_settings

KEYS = {"key-a": "acme", "key-a-bob": "acme/bob", "key-b": "globex"}


@pytest.fixture(scope="module")
def server(scripted_server) -> Iterator[ThreadServer]:
    live = ThreadServer(create_app(memory_settings(scripted_server, api_keys=KEYS))).start()
    yield live
    live.stop()


@pytest.fixture
async def clients(server, scripted_model) -> AsyncIterator[dict[str, httpx.AsyncClient]]:
    made = {name: httpx.AsyncClient(base_url=server.url, timeout=30, headers={"X-API-Key": key}) for name, key in
            {"a": "key-a", "bob": "key-a-bob", "b": "key-b"}.items()}
    made["anonymous"] = httpx.AsyncClient(base_url=server.url, timeout=30)
    yield made
    for client in made.values():
        await client.aclose()


async def a_conversation(client: httpx.AsyncClient) -> tuple[str, str]:
    sid = (await client.post("/api/v1/sessions", json={"title": "secret plans"})).json()["id"]
    got = await collect(client, "POST", f"/api/v1/sessions/{sid}/chat", json={"query": "the plan", "rewrite_enabled": False})
    return sid, got[0].event["assistant_message_id"]


def session_requests(sid: str, mid: str) -> list[tuple[str, str, dict]]:
    """One request per session-scoped route (every method of every /sessions/{id} path)."""
    base = f"/api/v1/sessions/{sid}"
    return [
        ("GET", base, {}),
        ("PATCH", base, {"json": {"title": "mine now"}}),
        ("DELETE", base, {}),
        ("POST", f"{base}/title", {"json": {}}),
        ("POST", f"{base}/knowledge-chat", {"json": {"query": "leak?"}}),
        ("POST", f"{base}/chat", {"json": {"query": "leak?"}}),
        ("GET", f"{base}/continue-stream", {"params": {"message_id": mid}}),
        ("GET", f"/api/v1/sessions/continue-stream/{sid}", {"params": {"message_id": mid}}),  # the seed's path
        ("POST", f"{base}/stop", {"json": {"message_id": mid}}),
        ("POST", f"{base}/inject", {"json": {"content": "leak?"}}),
        ("GET", f"{base}/approvals", {}),
        ("POST", f"{base}/approvals", {"json": {"tool_call_id": "c1", "approved": True}}),
        ("GET", f"{base}/messages", {}),
        ("DELETE", f"{base}/messages", {}),
        ("DELETE", f"{base}/messages/{mid}", {}),
        ("POST", f"{base}/fork", {"json": {"message_id": mid}}),
        ("POST", f"{base}/rewind", {"json": {"message_id": mid}}),
    ]


def test_the_isolation_table_covers_every_session_route():
    covered = {(method, path.replace("{sid}", "{session_id}")) for method, path, _ in session_requests("{sid}", "{message_id}")}
    routes = {(m, r.path) for r in ROUTES for m in (r.methods or ()) if m != "HEAD" and "{session_id}" in r.path}
    assert routes == covered


async def test_requests_without_a_valid_key_are_refused(clients):
    assert (await clients["anonymous"].get("/api/v1/sessions")).status_code == 401
    bad = httpx.AsyncClient(base_url=str(clients["a"].base_url), headers={"Authorization": "Bearer wrong"})
    assert (await bad.get("/api/v1/sessions")).status_code == 401
    await bad.aclose()
    assert (await clients["anonymous"].get("/health")).status_code == 200
    assert (await clients["anonymous"].get("/api/v1/openapi.json")).status_code == 200


async def test_another_tenant_reaches_nothing_through_any_session_route(clients):
    sid, mid = await a_conversation(clients["a"])
    for method, url, kwargs in session_requests(sid, mid):
        response = await clients["b"].request(method, url, **kwargs)
        assert response.status_code == 404, (method, url, response.status_code)
        assert "secret" not in response.text and "the plan" not in response.text
    listed = (await clients["b"].get("/api/v1/sessions")).json()
    assert sid not in [s["id"] for s in listed["items"]]
    batch = await clients["b"].post("/api/v1/sessions/batch-delete", json={"ids": [sid]})
    assert batch.status_code == 404
    messages = (await clients["a"].get(f"/api/v1/sessions/{sid}/messages")).json()["items"]
    assert [m["content"] for m in messages][0] == "the plan"  # nothing was changed


async def test_a_colleague_reads_but_only_the_owner_changes_or_deletes(clients):
    sid, mid = await a_conversation(clients["a"])
    bob = clients["bob"]
    assert (await bob.get(f"/api/v1/sessions/{sid}")).status_code == 200
    assert (await bob.get(f"/api/v1/sessions/{sid}/messages")).status_code == 200
    for method, url, kwargs in [r for r in session_requests(sid, mid) if r[0] in ("DELETE", "PATCH") or r[1].endswith(("stop", "inject", "approvals", "rewind", "chat", "title"))]:
        response = await bob.request(method, url, **kwargs)
        assert response.status_code == 403, (method, url, response.status_code)
    fork = await bob.post(f"/api/v1/sessions/{sid}/fork", json={"message_id": mid})
    assert fork.status_code == 201 and fork.json()["owner_id"] == "bob"
    assert (await bob.get(f"/api/v1/sessions/{sid}")).status_code == 200


async def test_clearing_sessions_clears_only_the_callers_own(clients):
    mine = (await clients["a"].post("/api/v1/sessions", json={"title": "acme's"})).json()["id"]
    bobs = (await clients["bob"].post("/api/v1/sessions", json={"title": "bob's"})).json()["id"]
    globex = (await clients["b"].post("/api/v1/sessions", json={"title": "globex's"})).json()["id"]
    cleared = (await clients["bob"].post("/api/v1/sessions/clear", json={"confirm": True})).json()["deleted"]
    assert bobs in cleared and mine not in cleared and globex not in cleared
    assert (await clients["a"].get(f"/api/v1/sessions/{mine}")).status_code == 200
    assert (await clients["b"].get(f"/api/v1/sessions/{globex}")).status_code == 200
    assert (await clients["bob"].get(f"/api/v1/sessions/{bobs}")).status_code == 404


async def test_an_event_source_may_pass_its_key_in_the_query(clients, server):
    sid, mid = await a_conversation(clients["a"])
    async with httpx.AsyncClient(base_url=server.url) as browser:
        got = await collect(browser, "GET", f"/api/v1/sessions/{sid}/continue-stream", params={"message_id": mid, "api_key": "key-a"})
        assert got[-1].type == "complete"
        seed_path = await collect(browser, "GET", f"/api/v1/sessions/continue-stream/{sid}", params={"message_id": mid, "api_key": "key-a"})
        assert seed_path[-1].type == "complete"
        assert (await browser.get(f"/api/v1/sessions/continue-stream/{sid}", params={"message_id": mid, "api_key": "key-b"})).status_code in (403, 404)
        assert (await browser.get(f"/api/v1/sessions/{sid}", params={"api_key": "key-a"})).status_code == 401
