"""What the page says about where an answer comes from, besides its sources: a "?" after a sentence
no passage supports (issue 30, honest attribution), and a note under an answer asked with no
knowledge base checked. Headless Chromium against `ragline serve --sample` with a scripted model."""

from __future__ import annotations

from tests.browser.test_chat_page import answer_text, ask, last_answer, script
from tests.scripted_model import Reply

# The first sentence is the pairing passage's; the second claims what no passage says.
ANSWER = "Pairing takes up to three minutes. The warranty also covers accidental water damage to the display."


def test_a_sentence_no_passage_supports_shows_a_question_mark_instead_of_a_source(page, model):
    script(model, Reply.text(ANSWER))
    ask(page)
    page.locator(".msg.assistant.done").wait_for()
    answer = last_answer(page)
    assert answer.locator("sup.cite button").count() == 1  # the supported sentence keeps its matched source
    mark = answer.locator("sup.unsupported")
    assert mark.count() == 1 and mark.inner_text() == "?"
    assert mark.get_attribute("title") == "No passage of the knowledge base supports this sentence"
    text = " ".join(answer_text(page).split())
    assert text.endswith("damage to the display.?")  # the mark stands right after its sentence
    assert text.index("minutes.") < text.index("The warranty")


def test_an_answer_asked_with_no_knowledge_base_says_it_is_the_models_own(page, model):
    script(model, Reply.text("Pairing usually takes a few minutes."))
    page.locator(".kb", has_text="sample").locator("input[type=checkbox]").uncheck()
    ask(page)
    page.locator(".msg.assistant.done").wait_for()
    status = last_answer(page).locator(".status")
    assert status.inner_text() == "No knowledge base was searched: this answer is the model's own, not from your documents."
    assert last_answer(page).locator("sup.cite, sup.unsupported").count() == 0
