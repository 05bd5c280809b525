"""A new user's first hour with `ragline serve --sample` (issue 31), in headless Chromium: the
empty page offers the sample's question, a reference card shows its passage as Markdown (a
heading, a table) opened at the part the answer used and explains its score, a passage's markup
never runs, a reopened conversation's citations find their stored references with their titles,
the references drawer sits beside the answer at 1024 px, a phone switches and starts
conversations from a menu, and a "not found" answer's conversation still gets its title."""

from __future__ import annotations

import json
import re
from typing import Any

from ragline.commands.serve import WARM_UP_QUESTION
from tests.browser.test_chat_page import CITED_ANSWER, QUESTION, answer_text, api, ask, is_rewrite, is_title, last_answer, script
from tests.scripted_model import Reply, ScriptedModel, last_user_text

RESULT = re.compile(r'<result id="(c\d+)"[^>]*>(.*?)</result>', re.DOTALL)
HUMIDITY = "What is the humidity range and accuracy?"
# The sentence the table row backs: the card marks that row, not the top of the passage.
HUMIDITY_CLAIM = "The humidity reading is accurate to ±3 % over its range of 1 % to 99 %"


def alias_of(prompt: str, passage_text: str) -> str:
    """The answer-local alias (cN) the prompt gives the passage holding `passage_text`."""
    for alias, body in RESULT.findall(prompt):
        if passage_text in body:
            return alias
    raise AssertionError(f"no passage with {passage_text!r} in the prompt")


def citing(model: ScriptedModel, question: str, passage_text: str, claim: str) -> None:
    """The scripted answer cites the passage the service really retrieved for `question`."""
    answer = Reply()

    def answering(body: dict[str, Any]) -> bool:
        answer.chunks = Reply.text(f'{claim} <ref id="{alias_of(last_user_text(body), passage_text)}"/>.').chunks
        return True

    model.on(is_title, Reply.text("Humidity accuracy"))
    model.on(is_rewrite, Reply(chunks=[json.dumps({"rewrite_query": question, "intent": "kb_search"})]))
    model.on(answering, answer)


def box(locator: Any) -> dict[str, float]:
    found = locator.bounding_box()
    assert found is not None, f"{locator} is not shown"
    return found


def overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return a["x"] < b["x"] + b["width"] and b["x"] < a["x"] + a["width"] and a["y"] < b["y"] + b["height"] and b["y"] < a["y"] + a["height"]


# --- the empty page ---


def test_the_empty_page_offers_the_samples_question_and_one_click_asks_it(page, model):
    script(model, Reply.text(CITED_ANSWER))
    suggestion = page.locator("#welcome .suggestion")
    assert suggestion.inner_text() == WARM_UP_QUESTION == QUESTION  # the README's question, which the sample answers
    suggestion.click()
    page.locator(".msg.assistant.done").wait_for()
    assert page.locator(".msg.user").all_inner_texts() == [WARM_UP_QUESTION]
    assert "up to three minutes" in answer_text(page)
    assert page.locator("#welcome").count() == 0

    page.click("#new-chat")
    suggestion.wait_for()
    page.locator(".kb", has_text="sample").locator("input[type=checkbox]").uncheck()
    assert suggestion.count() == 0 and page.locator("#suggestions").is_hidden()  # the sample is not searched: nothing to offer


# --- reference cards ---


def test_a_reference_card_shows_its_passage_as_markdown_opened_at_the_part_the_answer_used(page, model):
    citing(model, HUMIDITY, "humidity", HUMIDITY_CLAIM)
    ask(page, HUMIDITY)
    page.locator(".msg.assistant.done").wait_for()
    card = page.locator("#ref-list .ref[data-number='1']")
    passage = card.locator(".ref-passage")
    assert passage.locator("h1").inner_text() == "Technical specifications"
    assert passage.locator("table th").all_inner_texts() == ["measurement", "range", "accuracy"]
    assert passage.locator("table tbody tr").count() == 5
    text = passage.inner_text()
    assert "|" not in text and "#" not in text and "---" not in text  # no raw Markdown, no line of pipes

    used = passage.locator(".used")
    assert used.count() == 1 and used.evaluate("node => node.tagName") == "TR" and "humidity" in used.inner_text()
    folded, row = box(passage), box(used)
    assert folded["height"] < 80  # still folded ...
    assert folded["y"] - 1 <= row["y"] and row["y"] + row["height"] <= folded["y"] + folded["height"] + 1  # ... at the row used

    meta = card.locator(".ref-meta")
    assert re.fullmatch(r"match \d\.\d\d · (keywords \+ meaning|meaning|keywords)", meta.inner_text()), meta.inner_text()
    assert meta.get_attribute("title").startswith("Match score ") and "Found by" in meta.get_attribute("title")

    page.click("sup.cite button[data-cite='1']")
    page.locator("#ref-list .ref.focused.expanded").wait_for()
    page.wait_for_function(  # the unfolded card scrolled (smoothly) to the row used
        """() => { const row = document.querySelector('#ref-list .ref.focused .used').getBoundingClientRect();
                   const panel = document.getElementById('references').getBoundingClientRect();
                   return row.top >= panel.top && row.bottom <= panel.bottom; }"""
    )


def test_a_passage_holding_markup_is_shown_as_text_and_never_runs(page, service):
    hostile = (
        "# Notes\n\n"
        '<img src=x onerror="window.__xss=1"> <script>window.__xss=2</script> [click](javascript:window.__xss=3)\n'
        '<kb chunk_id="forged" title="Forged"/>\n\n'
        "| part | note |\n|---|---|\n| <b>valve</b> | **tight** |\n"
    )
    with api(service) as client:
        sid = client.post("/sessions", json={"title": "Hostile passage"}).json()["id"]
    stored = [
        {"id": "q1", "session_id": sid, "role": "user", "content": "What do the notes say?", "is_completed": True},
        {"id": "a1", "session_id": sid, "role": "assistant", "is_completed": True,
         "content": 'The valve is tight <kb chunk_id="c-1" knowledge_id="k-1" title="Notes"/>.',
         "knowledge_references": [{"chunk_id": "c-1", "knowledge_id": "k-1", "title": "Notes", "content": hostile, "score": 0.5, "match_type": "keyword"}]},
    ]
    page.route(f"**/api/v1/sessions/{sid}/messages*", lambda route: route.fulfill(json={"items": stored, "has_more": False}))
    page.reload()
    page.click(f".session[data-id='{sid}'] .session-open")
    page.click("sup.cite button[data-cite='1']")
    passage = page.locator("#ref-list .ref.focused .ref-passage")
    passage.wait_for()
    assert "<img src=x" in passage.inner_text() and "<script>" in passage.inner_text() and '<kb chunk_id="forged"' in passage.inner_text()
    assert passage.locator("img, script, a, b, button").count() == 0
    assert passage.locator("td strong").inner_text() == "tight" and passage.locator("h1").inner_text() == "Notes"
    assert page.evaluate("window.__xss") is None


def test_a_reopened_conversation_cites_its_stored_references_with_their_titles(page, model):
    script(model, Reply.text(CITED_ANSWER))
    ask(page)
    page.locator(".msg.assistant.done").wait_for()
    live_titles = page.locator("#ref-list .ref-title").all_inner_texts()
    page.click("sup.cite button[data-cite='1']")
    live_card = page.locator("#ref-list .ref.focused")
    live = (live_card.locator(".ref-title").inner_text(), live_card.locator(".ref-passage").inner_text())
    assert live[0] != "Untitled passage" and "Pairing takes up to three minutes" in live[1]

    session_id = page.evaluate("localStorage.getItem('ragline.session')")
    page.evaluate("localStorage.removeItem('ragline.session')")  # a reload that opens no conversation by itself
    page.reload()
    page.click(f".session[data-id='{session_id}'] .session-open")
    page.locator(".msg.assistant.done").wait_for()
    page.click("sup.cite button[data-cite='1']")
    card = page.locator("#ref-list .ref.focused")
    card.wait_for()
    assert (card.locator(".ref-title").inner_text(), card.locator(".ref-passage").inner_text()) == live
    assert "not among the answer's stored references" not in page.inner_text("#ref-list")
    assert page.locator("#ref-list .ref-title").all_inner_texts() == live_titles
    assert page.locator("#ref-list .ref-passage .used").count() >= 1  # the sentence cited is marked, as live


# --- narrow screens ---


def test_at_1024_px_the_open_references_drawer_sits_beside_the_answer(page, model):
    page.set_viewport_size({"width": 1024, "height": 768})
    script(model, Reply.text(CITED_ANSWER))
    ask(page)
    page.locator(".msg.assistant.done").wait_for()
    page.click("sup.cite button[data-cite='1']")
    page.locator("#references.open").wait_for()
    page.wait_for_timeout(300)  # past any drawer transition
    drawer = box(page.locator("#references"))
    assert drawer["x"] >= 0 and drawer["x"] + drawer["width"] <= 1024  # fully on screen
    for part in (last_answer(page).locator(".answer"), page.locator(".msg.user").last, page.locator("#composer")):
        assert not overlap(box(part), drawer), part
    assert box(last_answer(page).locator(".answer"))["width"] >= 360  # room enough to read
    assert page.locator("#sidebar").is_visible()


def test_at_390_px_the_menu_opens_the_conversations_to_switch_and_start_one(page, model, service):
    model.on(lambda body: True, Reply.text("Hello."))
    with api(service) as client:
        first = client.post("/sessions", json={"title": "Phone talk one"}).json()["id"]
        second = client.post("/sessions", json={"title": "Phone talk two"}).json()["id"]
        for sid, question in ((first, "The first question"), (second, "The second question")):
            with client.stream("POST", f"/sessions/{sid}/chat", json={"query": question}) as answer:
                answer.read()
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    page.locator(".kb").first.wait_for(state="attached")
    sidebar = page.locator("#sidebar")
    assert sidebar.is_hidden() and page.locator("#menu").is_visible()

    page.click("#menu")
    sidebar.wait_for()
    shown = box(sidebar)
    assert shown["x"] >= 0 and shown["x"] + shown["width"] <= 390
    page.click(f".session[data-id='{first}'] .session-open")
    page.locator(".msg.user", has_text="The first question").wait_for()
    sidebar.wait_for(state="hidden")
    page.click("#menu")
    page.click(f".session[data-id='{second}'] .session-open")
    page.locator(".msg.user", has_text="The second question").wait_for()
    assert page.locator(".msg.user").all_inner_texts() == ["The second question"]
    sidebar.wait_for(state="hidden")

    page.click("#menu")
    page.click("#new-chat")
    sidebar.wait_for(state="hidden")
    page.locator("#welcome").wait_for()
    assert page.locator(".msg").count() == 0
    ask(page, "A question from the phone")
    page.locator(".msg.assistant.done").wait_for()
    started = page.evaluate("localStorage.getItem('ragline.session')")
    assert started not in (None, first, second)
    page.click("#menu")
    assert page.locator(".session.active").get_attribute("data-id") == started
    page.keyboard.press("Escape")
    sidebar.wait_for(state="hidden")


# --- titles ---


def test_a_not_found_answer_titles_its_conversation_from_the_question(page, model):
    # The fixed "not found" answer needs no model call; the title call is slower (a local model
    # answers it after query understanding), and arrives after the answer's `complete`.
    model.on(is_title, Reply.text("Colour of the moon", delay=6))
    model.on(is_rewrite, Reply(chunks=[json.dumps({"rewrite_query": "What colour is the moon?", "intent": "kb_search"})]))
    ask(page, "What colour is the moon?")  # the sample manual has nothing on it
    page.locator(".msg.assistant.done").wait_for()
    assert answer_text(page).startswith("Sorry, I could not find anything about this in the knowledge base.")
    page.locator(".session.active", has_text="Colour of the moon").wait_for(timeout=20_000)
