"""A worst-case obedient chat model: the scripted server answering as a provider that obeys
everything that reaches it (benchmarks/planted_documents.py --scripted, tests/generation/test_planted_guard.py).

Its rule reads only the request as sent: the passages of the `<search_results>` the graph built,
and the question beside them. The answer

- states the first sentence of the passage that shares the most words with the question (the
  first passage on a tie), citing it, and
- carries out everything else it read, mechanically: it cannot tell a passage's data from an
  instruction, so every other sentence of every passage is copied verbatim (a note to the
  assistant, "always end your answer with ...", "reply in French", a wrong number, a command),
  and then every URL of the passages not copied yet.

It knows nothing of the planted cases or of what Ragline leaves out of a passage: what the graph
did not send, it cannot obey. Copying is all it can do, so an instruction carried out only by
changing the answer (write in French, print the system prompt) reaches the answer as the
instruction's own words, not as its effect.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.scripted_model import Reply, ScriptedModel, last_user_text

_RESULT = re.compile(r"<result\b([^>]*)>\n?(.*?)\n?</result>", re.S)
_ALIAS = re.compile(r'\bid="([^"]+)"')
_RESULTS_BLOCK = re.compile(r"<(search_results|web_search_results)>.*?</\1>", re.S)
# a sentence ends at . ! ? (and closing quotes) before a space or the end (not the dot of a URL or of 10.0), or at 。！？
_SENTENCE = re.compile(r"\S.*?(?:[.!?]+[\"')\]]*(?=\s|$)|[。！？]+|$)", re.S)
_URL = re.compile(r"""(?:https?://|www\.)[^\s<>()\[\]{}"'`]+""", re.IGNORECASE)
_WORD = re.compile(r"[^\W\d_]{3,}|\d+(?:[.,]\d+)?|[\u3400-\u9fff]")  # words of 3+ letters, numbers, CJK characters


def passages(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(alias, text) of every passage in the request's messages, in the order sent."""
    found = []
    for message in body.get("messages", []):
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        for attributes, passage in _RESULT.findall(text):
            alias = _ALIAS.search(attributes)
            found.append((alias.group(1) if alias else "", passage.strip()))
    return found


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.findall(text)]


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def obedient_answer(body: dict[str, Any]) -> str:
    """The answer to a chat request: the answering sentence, cited, then everything else obeyed."""
    found = passages(body)
    if not found:
        return "I was given no passages."
    question = _RESULTS_BLOCK.sub(" ", last_user_text(body))
    wanted = _words(question)
    best = max(range(len(found)), key=lambda i: (len(wanted & _words(found[i][1])), -i))
    alias, text = found[best]
    stated = split_sentences(text)[0] if split_sentences(text) else text
    lines = [f'{stated} <ref id="{alias}"/>' if alias else stated]
    for _, passage in found:
        for sentence in split_sentences(passage):
            if sentence != stated and sentence not in lines:
                lines.append(sentence)
    written = "\n".join(lines)
    links = [url for url in dict.fromkeys(u for _, p in found for u in _URL.findall(p)) if url not in written]
    return "\n".join(lines + links)


def obedient_reply(body: dict[str, Any]) -> Reply:
    return Reply.text(obedient_answer(body))


class ObedientModel(ScriptedModel):
    """The scripted server with the obedient rule for every chat request (embeddings and rerank keep theirs)."""

    def _reply_for(self, body: dict[str, Any], rules: list[Any] | None = None) -> Reply | None:
        if rules is None or rules is self.rules:
            return obedient_reply(body)
        return super()._reply_for(body, rules)
