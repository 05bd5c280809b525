"""MCP OAuth on the chat page in headless Chromium (issue 28): an agent-mode assistant names an MCP
server that needs the user's own authorization (tests/mcp_oauth_server.py, the official SDK's OAuth
server). The answer shows a "Sign in" link; the user follows it in a new tab, the server grants and
sends the browser back to Ragline, and the answer goes on with the server's tool."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.browser.conftest import API_KEY, KEYS
from tests.browser.harness import SampleServer
from tests.conftest import SCRIPTED
from tests.mcp_oauth_server import served_with_oauth
from tests.redis_server import free_port
from tests.scripted_model import Reply, ScriptedCall, ScriptedModel


@pytest.fixture(scope="module")
def service(scripted_server: ScriptedModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """`ragline serve --sample` with the OAuth MCP server allowed, its public address its own."""
    data, port = tmp_path_factory.mktemp("browser-oauth"), free_port()
    with served_with_oauth() as crm:
        env = {"RAGLINE_DATA_DIR": str(data), "RAGLINE_CHAT_MODEL": SCRIPTED, "RAGLINE_CHAT_API_BASE": scripted_server.base_url,
               "RAGLINE_CHAT_API_KEY": "k", "RAGLINE_API_KEYS": json.dumps(KEYS), "RAGLINE_PUBLIC_URL": f"http://127.0.0.1:{port}",
               "RAGLINE_AGENT_MCP_SERVERS": json.dumps({"crm": crm.model_dump(mode="json")})}
        server = SampleServer(env, port=port, log=data / "serve.log").start()
        yield server
        server.stop()


def test_the_answer_offers_a_sign_in_link_and_goes_on_once_the_user_has_allowed(page, model, service):
    def tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
        return [m for m in body.get("messages", []) if m.get("role") == "tool"]

    model.on(lambda body: "short title" in str(body.get("messages")), Reply.text("Accounts"))
    model.on(lambda body: "tools" in body and not tool_messages(body), Reply.calling(ScriptedCall("crm__my_accounts", {}, id="a1")))
    model.on(lambda body: "tools" in body and bool(tool_messages(body)), Reply.text("You own Fjord Ltd and Harbour AB."))
    with httpx.Client(base_url=f"{service.url}/api/v1", headers={"X-API-Key": API_KEY}, timeout=30) as rest:
        made = rest.post("/assistants", json={"name": "CRM desk", "mode": "agent", "tools": ["search_knowledge"], "mcp_servers": ["crm"]}).json()
    page.reload()
    page.locator("#assistant-box:not([hidden])").wait_for()
    page.select_option("#assistant", made["id"])
    page.fill("#question", "Which accounts are mine?")
    page.click("#ask")
    waiting = page.locator(".msg.assistant.pending .step.approval")
    waiting.wait_for(timeout=60_000)
    assert "crm needs your authorization" in waiting.inner_text()
    with page.context.expect_page() as opened:
        waiting.get_by_role("link", name="Sign in to crm").click()
    tab = opened.value
    tab.wait_for_load_state()
    assert "Ragline may now use crm for you" in tab.inner_text("body")
    tab.close()
    done = page.locator(".msg.assistant.done").last
    done.wait_for(timeout=60_000)
    assert done.locator(".answer").inner_text() == "You own Fjord Ltd and Harbour AB."
    steps = done.locator(".steps").inner_text()
    assert "crm needs your authorization: authorized" in steps and done.locator(".step a.authorize").count() == 0
