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


def test_an_agent_mode_assistant_shows_its_search_steps_its_thought_and_only_its_answer(page, model, service):
    from tests.scripted_model import ScriptedCall

    def tool_rounds(body: dict[str, Any]) -> int:
        return sum(1 for m in body.get("messages", []) if m.get("role") == "tool")

    model.on(lambda body: "short title" in str(body.get("messages")), Reply.text("Pairing"))
    model.on(lambda body: "tools" in body and tool_rounds(body) == 0,
             Reply.calling(ScriptedCall("search_knowledge", {"query": "pairing time"}, id="s1"), text="Let me look that up."))
    model.on(lambda body: "tools" in body and tool_rounds(body) == 1, Reply.text("Pairing takes about a minute.", chunk_delay=0.3))
    with api(service) as rest:
        sample = next(kb for kb in rest.get("/knowledge-bases").json()["items"] if kb["name"] == "sample")
        made = rest.post("/assistants", json={"name": "Researcher", "mode": "agent", "tools": ["search_knowledge"],
                                              "config": {"knowledge_base_ids": [sample["id"]]}}).json()
    try:
        page.reload()
        page.locator("#assistant-box:not([hidden])").wait_for()
        assert "Researcher" in page.locator("#assistant option").all_inner_texts()  # agent-mode assistants are offered too
        page.select_option("#assistant", made["id"])
        page.fill("#question", "How long does pairing take?")
        page.click("#ask")
        streaming = page.locator(".msg.assistant.pending .answer")
        page.wait_for_function("() => /Pairing/.test(document.querySelector('.msg.assistant.pending .answer')?.textContent || '')", timeout=60_000)
        assert "Let me look" not in streaming.inner_text()  # the introduction left the answer when its thought came
        answer = page.locator(".msg.assistant.done").last
        answer.wait_for(timeout=60_000)
        assert answer.locator(".answer").inner_text() == "Pairing takes about a minute."  # nor is it part of the end
        assert "Let me look that up." in (answer.locator(".thinking-text").text_content() or "")  # folded: in the DOM, not drawn
        assert answer.locator(".step.done").all_inner_texts() == ["Searched the knowledge bases"]
    finally:
        with api(service) as rest:
            rest.delete(f"/assistants/{made['id']}")


def test_a_call_waiting_for_approval_is_approved_or_denied_with_a_button(page, model, service):
    from tests.scripted_model import ScriptedCall

    def tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
        return [m for m in body.get("messages", []) if m.get("role") == "tool"]

    model.on(lambda body: "short title" in str(body.get("messages")), Reply.text("Pairing"))
    model.on(lambda body: "tools" in body and not tool_messages(body),
             Reply.calling(ScriptedCall("search_knowledge", {"query": "pairing time"}, id="s1")))
    model.on(lambda body: "tools" in body and "denied" in str(tool_messages(body)), Reply.text("I may not search, so I cannot say."))
    model.on(lambda body: "tools" in body and bool(tool_messages(body)), Reply.text("Pairing takes about a minute."))
    with api(service) as rest:
        sample = next(kb for kb in rest.get("/knowledge-bases").json()["items"] if kb["name"] == "sample")
        made = rest.post("/assistants", json={"name": "Careful", "mode": "agent", "tools": ["search_knowledge"],
                                              "approval_tools": ["search_knowledge"], "config": {"knowledge_base_ids": [sample["id"]]}}).json()
    try:
        page.reload()
        page.locator("#assistant-box:not([hidden])").wait_for()
        page.select_option("#assistant", made["id"])
        for turn, (button, outcome, answer) in enumerate((("Approve", "approved", "Pairing takes about a minute."), ("Deny", "denied", "I may not search, so I cannot say."))):
            page.fill("#question", "How long does pairing take?")
            page.click("#ask")
            waiting = page.locator(".msg.assistant.pending .step.approval")
            waiting.wait_for(timeout=60_000)
            assert "asks to run search_knowledge: “pairing time”" in waiting.inner_text()
            waiting.get_by_role("button", name=button).click()
            done = page.locator(".msg.assistant.done").nth(turn)
            done.wait_for(timeout=60_000)
            assert done.locator(".answer").inner_text() == answer
            assert f"search_knowledge: “pairing time”: {outcome}" in done.locator(".steps").inner_text()
            assert done.locator(".step button").count() == 0  # decided: no button is left
    finally:
        with api(service) as rest:
            rest.delete(f"/assistants/{made['id']}")
