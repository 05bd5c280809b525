"""Make docs/screenshot.png: the chat page answering a question from the sample knowledge base.

    python -m tests.browser.screenshot [docs/screenshot.png]

Runs `ragline serve --sample` (dev mode, a throwaway data directory) with the scripted model as
the chat model. The scripted answer cites the passages the service really retrieved for the
question: it reads the `<result id="cN">` blocks of the prompt and cites the alias of the setup
chapter and of the overview, so every superscript opens a real chunk of the sample manual.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from tests.browser.harness import SampleServer, launch_chromium, missing_browser
from tests.scripted_model import Reply, ScriptedModel, last_user_text, system_text

QUESTION = "How do I pair the Aurora sensor, and how long does it take?"
RESULT = re.compile(r'<result id="(c\d+)"[^>]*>(.*?)</result>', re.DOTALL)


def alias_of(prompt: str, passage_text: str) -> str | None:
    for alias, body in RESULT.findall(prompt):
        if passage_text in body:
            return alias
    return None


def cited_answer(prompt: str) -> str:
    setup = alias_of(prompt, "Pairing takes up to three minutes")
    if setup is None:
        raise RuntimeError("the pairing passage was not retrieved")
    overview = alias_of(prompt, "sends readings to the console every") or setup  # the gate may leave only the setup page
    return (
        f'Pairing takes **up to three minutes** <ref id="{setup}"/>. To pair the outdoor sensor with the console:\n\n'
        "1. Insert the batteries in the outdoor sensor first.\n"
        "2. Plug in the console within one minute.\n"
        f'3. Hold the **SENSOR** button on the console for three seconds until the radio icon blinks <ref id="{setup}"/>.\n\n'
        "Once paired, the sensor sends its readings to the console every 16 seconds over 868 MHz radio "
        f'(915 MHz in North America) <ref id="{overview}"/>, and the console keeps the pairing after a power cut <ref id="{setup}"/>.'
    )


def script(model: ScriptedModel) -> None:
    answer = Reply(chunk_delay=0.01)

    def answering(body: dict[str, Any]) -> bool:
        answer.chunks = Reply.text(cited_answer(last_user_text(body))).chunks  # composed from this prompt
        return True

    model.on(lambda body: "short title" in str(body.get("messages")), Reply.text("Pairing the Aurora sensor"))
    rewrite = json.dumps({"rewrite_query": QUESTION, "intent": "kb_search"})
    model.on(lambda body: "rewrite_query" in system_text(body), Reply(chunks=[rewrite]))
    model.on(answering, answer)


def main(out: Path) -> None:
    reason = missing_browser()
    if reason:
        sys.exit(reason)
    from playwright.sync_api import sync_playwright

    model = ScriptedModel().start()
    script(model)
    with tempfile.TemporaryDirectory() as data:
        env = {"RAGLINE_DATA_DIR": data, "RAGLINE_CHAT_MODEL": "openai/scripted", "RAGLINE_CHAT_API_BASE": model.base_url, "RAGLINE_CHAT_API_KEY": "k"}
        server = SampleServer(env, log=Path(data) / "serve.log").start()
        try:
            with sync_playwright() as playwright:
                browser = launch_chromium(playwright)
                page = browser.new_page(viewport={"width": 1320, "height": 820})
                page.goto(server.url)
                page.locator(".kb", has_text="sample").wait_for()
                page.fill("#question", QUESTION)
                page.click("#ask")
                page.locator(".msg.assistant.done").wait_for(timeout=60_000)
                page.locator(".session.active", has_text="Pairing").wait_for()
                page.click("sup.cite button[data-cite='1']")
                page.locator("#ref-list .ref.focused").wait_for()
                page.mouse.move(0, 0)  # no hover highlight in the picture
                page.wait_for_timeout(400)  # the smooth scroll to the passage
                out.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(out))
                browser.close()
        finally:
            server.stop()
            model.stop()
    print(f"wrote {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshot.png"))
