"""No API key reaches a log line: a real `ragline serve` at log level info (access logs on) is
asked with valid and wrong keys in headers and in `?api_key=` (how an EventSource sends it),
and its whole log is searched for them."""

from __future__ import annotations

import json

import httpx

from tests.api.live import ProcessServer
from tests.conftest import SCRIPTED

VALID, WRONG = "valid-key-7f3a9c", "wrong-key-55d1e0"


def test_no_key_valid_or_wrong_appears_in_the_servers_log(tmp_path, scripted_server):
    log = tmp_path / "serve.log"
    env = {"RAGLINE_DATA_DIR": str(tmp_path / "data"), "RAGLINE_API_KEYS": json.dumps({VALID: "acme"}),
           "RAGLINE_CHAT_MODEL": SCRIPTED, "RAGLINE_CHAT_API_BASE": scripted_server.base_url, "RAGLINE_CHAT_API_KEY": "k"}
    server = ProcessServer(env, log=log, log_level="info").start(timeout=120)
    base = server.url
    try:
        kb_id = httpx.post(f"{base}/api/v1/knowledge-bases", json={"name": "manuals"}, headers={"X-API-Key": VALID}).json()["id"]
        statuses = [
            httpx.get(f"{base}/api/v1/knowledge-bases/{kb_id}/jobs/nope/events?api_key={VALID}").status_code,
            httpx.get(f"{base}/api/v1/knowledge-bases/{kb_id}/jobs/nope/events?api_key={WRONG}").status_code,
            httpx.get(f"{base}/api/v1/knowledge-bases", headers={"Authorization": f"Bearer {WRONG}"}).status_code,
            httpx.get(f"{base}/api/v1/sessions/s/continue-stream?api_key={VALID}&message_id=m").status_code,
        ]
        assert 401 in statuses and 404 in statuses  # the requests were really served (and logged)
    finally:
        server.stop()
    text = log.read_text()
    assert "/jobs/nope/events?api_key=[redacted]" in text  # the access log has the lines...
    assert VALID not in text and WRONG not in text  # ...and no key
