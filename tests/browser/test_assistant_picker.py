"""The chat page's assistant picker in headless Chromium (issue 28): the tenant's assistants are
offered in a select, a question goes with the chosen one's id, its configuration answers, and the
knowledge bases checked on the page are not sent when the assistant keeps its own."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.browser.conftest import API_KEY
from tests.scripted_model import Reply, system_text

BOB = "You are Bob, the support desk."


def api(service: Any) -> httpx.Client:
    return httpx.Client(base_url=f"{service.url}/api/v1", headers={"X-API-Key": API_KEY}, timeout=30)


def test_a_question_asked_with_the_chosen_assistant_carries_its_id_and_gets_its_answer(page, model, service):
    model.on(lambda body: "short title" in str(body.get("messages")), Reply.text("Bob"))
    model.on(lambda body: BOB in system_text(body), Reply.text("I am Bob."))
    with api(service) as rest:
        made = rest.post("/assistants", json={"name": "Bob", "description": "The support desk", "overridable": ["language"],
                                              "config": {"summary": {"prompt": BOB}, "rewrite_enabled": False}}).json()
    sent: list[tuple[str, dict[str, Any]]] = []
    page.on("request", lambda r: sent.append((r.url, json.loads(r.post_data or "{}"))) if r.method == "POST" and "chat" in r.url else None)
    page.reload()
    page.locator("#assistant-box:not([hidden])").wait_for()
    assert page.locator("#assistant option").all_inner_texts() == ["None (this page's choices)", "Bob"]
    assert page.is_checked(".kb input[type=checkbox]")  # the sample base stays checked for questions without an assistant
    page.select_option("#assistant", made["id"])
    assert "answers from its own knowledge bases" in page.inner_text("#assistant-box .hint")
    page.fill("#question", "Who are you?")
    page.click("#ask")
    page.locator(".msg.assistant.done").wait_for()
    assert page.locator(".msg.assistant .answer").last.inner_text() == "I am Bob."
    url, body = sent[-1]
    assert url.endswith("/chat") and body == {"query": "Who are you?", "assistant_id": made["id"]}  # no knowledge_base_ids
    page.reload()  # the choice is remembered
    page.locator("#assistant-box:not([hidden])").wait_for()
    assert page.input_value("#assistant") == made["id"]
    with api(service) as rest:
        rest.delete(f"/assistants/{made['id']}")
