"""No credential reaches a log line: a real `ragline serve` at log level debug, in both log formats,
is asked through every door (REST, OpenAI, MCP, Dify, the OAuth callback) with valid and wrong keys
in headers and in the query (`?api_key=`, how an EventSource sends it, with the name plain and
percent-encoded), tokens, and an authorization code and state; its whole log is then searched for
every one of them."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.api.live import ProcessServer
from tests.conftest import SCRIPTED

VALID, ENCODED = "valid-key-7f3a9c", "valid-key-enc-19b2"  # two keys of the service
WRONG, WRONG_UPPER, WRONG_TWICE, WRONG_ROUTE = "wrong-key-55d1e0", "wrong-key-upper-0c4e", "wrong-key-twice-8d21", "wrong-route-key-3e9a"
TOKEN, ACCESS_TOKEN = "tok-a81f00", "access-tok-c7d3"
CODE, STATE, CODE_ENCODED, STATE_ENCODED = "oauth-code-1d9e", "oauth-state-40aa", "oauth-code-enc-77f1", "oauth-state-enc-2b6c"
SECRETS = (VALID, ENCODED, WRONG, WRONG_UPPER, WRONG_TWICE, WRONG_ROUTE, TOKEN, ACCESS_TOKEN, CODE, STATE, CODE_ENCODED, STATE_ENCODED)


def _serve(tmp_path, scripted_server, log_format: str) -> ProcessServer:
    env = {"RAGLINE_DATA_DIR": str(tmp_path / "data"), "RAGLINE_API_KEYS": json.dumps({VALID: "acme", ENCODED: "acme"}),
           "RAGLINE_CHAT_MODEL": SCRIPTED, "RAGLINE_CHAT_API_BASE": scripted_server.base_url, "RAGLINE_CHAT_API_KEY": "k"}
    return ProcessServer(env, log=tmp_path / "serve.log", log_level="debug", args=("--log-format", log_format))


def _every_door(base: str) -> dict[str, int]:
    """One request of each kind, by name: its status (the test checks a few to know they were served)."""
    valid, bearer = {"X-API-Key": VALID}, {"Authorization": f"Bearer {WRONG}"}
    kb = httpx.post(f"{base}/api/v1/knowledge-bases", json={"name": "manuals"}, headers=valid).json()["id"]
    events = f"{base}/api/v1/knowledge-bases/{kb}/jobs/nope/events"
    mcp_init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    mcp_headers = {"Accept": "application/json, text/event-stream"}
    calls = {
        "events, plain name": lambda: httpx.get(f"{events}?api_key={VALID}"),
        "events, encoded name": lambda: httpx.get(f"{events}?api%5Fkey={ENCODED}&after=0"),
        "events, upper encoded name": lambda: httpx.get(f"{events}?API%5FKEY={WRONG_UPPER}"),
        "events, name encoded twice": lambda: httpx.get(f"{events}?api%255Fkey={WRONG_TWICE}"),
        "events, wrong key": lambda: httpx.get(f"{events}?api_key={WRONG}"),
        "continue-stream": lambda: httpx.get(f"{base}/api/v1/sessions/s/continue-stream?api_key={VALID}&message_id=m"),
        "query key on a header route": lambda: httpx.get(f"{base}/api/v1/knowledge-bases?api_key={WRONG_ROUTE}"),
        "tokens in the query": lambda: httpx.get(f"{base}/api/v1/knowledge-bases?token={TOKEN}&access%5Ftoken={ACCESS_TOKEN}", headers=valid),
        "rest, wrong bearer": lambda: httpx.get(f"{base}/api/v1/knowledge-bases", headers=bearer),
        "openai, models": lambda: httpx.get(f"{base}/v1/models", headers={"Authorization": f"Bearer {VALID}"}),
        "openai, wrong bearer": lambda: httpx.post(f"{base}/v1/chat/completions", json={"model": "ragline", "messages": []}, headers=bearer),
        "mcp, valid": lambda: httpx.post(f"{base}/mcp", json=mcp_init, headers={**mcp_headers, "X-API-Key": VALID}),
        "mcp, wrong": lambda: httpx.post(f"{base}/mcp", json=mcp_init, headers={**mcp_headers, **bearer}),
        "dify, wrong": lambda: httpx.post(f"{base}/retrieval", json={"knowledge_id": kb, "query": "q"}, headers=bearer),
        "oauth callback": lambda: httpx.get(f"{base}/api/v1/mcp/oauth/callback?state={STATE}&code={CODE}"),
        "oauth callback, encoded names": lambda: httpx.get(f"{base}/api/v1/mcp/oauth/callback?st%61te={STATE_ENCODED}&C%4Fde={CODE_ENCODED}"),
    }
    return {name: call().status_code for name, call in calls.items()}


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_no_key_token_or_code_appears_in_any_line_of_the_servers_debug_log(tmp_path, scripted_server, log_format):
    server = _serve(tmp_path, scripted_server, log_format).start(timeout=120)
    try:
        statuses = _every_door(server.url)
    finally:
        server.stop()
    assert statuses["events, plain name"] == statuses["events, encoded name"] == 404  # both names are the key: the job is looked up
    assert statuses["events, upper encoded name"] == statuses["events, name encoded twice"] == statuses["events, wrong key"] == 401
    assert statuses["query key on a header route"] == 401 and statuses["tokens in the query"] == 200
    assert statuses["oauth callback"] == 400 and statuses["mcp, wrong"] == 401
    lines = (tmp_path / "serve.log").read_text().splitlines()
    text = "\n".join(lines)
    assert "/jobs/nope/events?api%5Fkey=[redacted]&after=0" in text  # the access log has the lines...
    assert "/mcp/oauth/callback?state=[redacted]&code=[redacted]" in text
    leaks = [(secret, line) for line in lines for secret in SECRETS if secret in line]
    assert not leaks  # ...and no credential


def test_a_key_in_the_query_of_a_route_that_takes_headers_only_is_refused_with_the_reason(tmp_path, scripted_server):
    from starlette.testclient import TestClient

    from ragline.api.app import create_app
    from tests.api.live import memory_settings

    settings = memory_settings(data_dir=tmp_path, api_keys={VALID: "acme"})
    with TestClient(create_app(settings)) as client:
        refused = client.get(f"/api/v1/knowledge-bases?api_key={VALID}")
        assert refused.status_code == 401 and "only the event streams" in refused.text
        assert client.get(f"/api/v1/knowledge-bases?api%5Fkey={VALID}").status_code == 401
        assert client.get("/api/v1/knowledge-bases", headers={"X-API-Key": VALID}).status_code == 200
