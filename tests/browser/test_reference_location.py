"""A reference card says where its passage stands (the heading path of a Markdown passage, the
pages of a PDF one) and opens the passage in its document: the document's text in a dialog (a
PDF's pages labelled), the passage highlighted and scrolled into view (issue 30 item 9). Headless Chromium against
`ragline serve --sample` with the scripted model."""

from __future__ import annotations

import uuid
from typing import Any

from tests.browser.test_chat_page import CITED_ANSWER, api, ask, script
from tests.ingestion.pdf_fixtures import CROSSING_END, CROSSING_START, manual_pdf
from tests.scripted_model import Reply

PDF_QUESTION = "How long does pairing take once the sensor light blinks green?"
CALIBRATION = "Calibrate the rain gauge by pouring 100 ml of water slowly into its funnel."


def visible_in(page: Any, inner: str, outer: str) -> bool:
    return page.evaluate(
        """([inner, outer]) => { const a = document.querySelector(inner).getBoundingClientRect();
                                 const b = document.querySelector(outer).getBoundingClientRect();
                                 return a.top >= b.top && a.bottom <= b.bottom; }""",
        [inner, outer],
    )


def test_a_card_shows_its_heading_path_and_opens_the_passage_in_its_document(page, model):
    script(model, Reply.text(CITED_ANSWER))
    ask(page)
    page.locator(".msg.assistant.done").wait_for()
    page.click("sup.cite button[data-cite='1']")
    card = page.locator("#ref-list .ref.focused")
    assert card.locator(".ref-location").inner_text() == "Setting up the Aurora > Pairing"

    card.locator(".ref-open").click()
    dialog = page.locator("#doc-dialog")
    passage = dialog.locator("mark.doc-passage")
    passage.wait_for()
    assert dialog.locator("#doc-where").inner_text() == "Setting up the Aurora > Pairing"
    assert "Pairing takes up to three minutes" in passage.inner_text()
    whole = dialog.locator("#doc-text").inner_text()
    assert whole.startswith("# Setting up the Aurora") and "## Wi-Fi" in whole  # the whole document, as text
    assert visible_in(page, "#doc-text mark.doc-passage", "#doc-text")
    dialog.locator("#doc-close").click()
    assert dialog.is_hidden()


def only_base_with(page: Any, service: Any, name: str, data: bytes) -> None:
    """A new knowledge base holding one uploaded file, and the page searching it alone."""
    with api(service) as client:
        base = f"{name.split('.')[0]}-{uuid.uuid4().hex[:8]}"
        kb = client.post("/knowledge-bases", json={"name": base, "chunking": {"chunk_size": 200, "chunk_overlap": 0}}).json()["id"]
        job = client.post(f"/knowledge-bases/{kb}/documents", files={"file": (name, data)}).json()
        while client.get(f"/knowledge-bases/{kb}/jobs/{job['id']}").json()["state"] not in ("done", "failed"):
            page.wait_for_timeout(200)
    page.reload()
    for box in page.locator(".kb").all():
        if base not in box.inner_text():
            box.locator("input[type=checkbox]").uncheck()


def test_a_passage_deep_in_a_long_document_is_scrolled_into_view(page, model, service):
    filler = "\n\n".join(f"Filler paragraph {i} says nothing about the weather station." for i in range(300))
    only_base_with(page, service, "notes.md", f"# Notes\n\n{filler}\n\n## Calibration\n\n{CALIBRATION}\n".encode())
    script(model, Reply.text("Pour 100 ml of water."))
    ask(page, "How do I calibrate the rain gauge?")
    page.locator(".msg.assistant.done").wait_for()
    page.evaluate("document.getElementById('references').classList.add('open')")
    page.locator("#ref-list .ref", has_text="rain gauge").first.locator(".ref-open").click()
    page.locator("#doc-dialog mark.doc-passage", has_text=CALIBRATION).wait_for()
    page.wait_for_function("document.getElementById('doc-text').scrollTop > 1000")
    assert visible_in(page, "#doc-text mark.doc-passage", "#doc-text")


def test_a_pdf_passage_across_a_page_break_shows_both_pages(page, model, service):
    only_base_with(page, service, "manual.pdf", manual_pdf())
    script(model, Reply.text("About forty seconds."))
    ask(page, PDF_QUESTION)
    page.locator(".msg.assistant.done").wait_for()
    page.evaluate("document.getElementById('references').classList.add('open')")
    card = page.locator("#ref-list .ref", has_text=CROSSING_START).first
    assert card.locator(".ref-location").inner_text().startswith("pp. ")
    card.locator(".ref-open").click()
    marks = page.locator("#doc-dialog mark.doc-passage")
    marks.first.wait_for()
    assert page.locator("#doc-text .doc-page").all_inner_texts() == ["Page 1", "Page 2", "Page 3"]
    marked = " ".join(marks.all_inner_texts())
    assert CROSSING_START in marked and CROSSING_END in marked  # marked on both sides of the page break
    assert "Page 2 of 3" not in page.locator("#doc-text").inner_text()  # the running footer was dropped
