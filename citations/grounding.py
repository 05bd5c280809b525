"""What an answer keeps of its sentences once attribution has judged them all.

Marking a sentence unsupported (citations/attribution.py) still shows it. Two verdicts are plain
enough to act on, since a wrong answer beside the documents' own words is worse than "not found":

* **The sources say the opposite.** A sentence whose close passage states its negation
  ("Yes, batteries are covered" against "Batteries ... are not covered") is replaced by that
  passage's sentence, quoted and cited. Small local models flip a negation they read (the
  sample manual's warranty questions, in English and Chinese).
* **Nothing is grounded and a number is made up.** When no claim of the answer is supported and
  one states a number that neither the passages nor the question hold ("The Aurora costs $150"
  from a manual without prices), the answer came from the model's memory: the turn ends in the
  fallback instead.

Both are decided after the answer ended, so a streamed answer is replaced (the `replace` event
the service also sends after a takeover).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ragline.citations.attribution import Judgement
from ragline.citations.support import LIST_MARKER
from ragline.citations.tags import UNSUPPORTED_MARK
from ragline.retrieval.tokenizer import has_han

_LEAD = re.compile(r"^\s*")


@dataclass(frozen=True, slots=True)
class Review:
    content: str  # the answer to keep
    ungrounded: bool = False  # nothing supported and a number made up: the turn ends in the fallback


def quoted(sentence: str, said: str, tag: str) -> str:
    """`sentence` (with its leading space or list marker kept) replaced by the source's own words."""
    lead = _LEAD.match(sentence).group(0)  # type: ignore[union-attr]
    lead += (marker.group(0) if (marker := LIST_MARKER.match(sentence[len(lead):])) else "")
    said = said.strip()
    if has_han(said):
        return f"{lead}资料原文：“{said}”{tag}"
    return f"{lead}The sources say: “{said}”{tag}"


def review(content: str, judgements: Sequence[Judgement], tag_for: Callable[[str], str]) -> Review:
    """The answer with each sentence the sources contradict replaced by their words; `ungrounded`
    when no judged claim is supported and one states a number nobody gave."""
    claims = [j for j in judgements if j.tags == UNSUPPORTED_MARK or j.verdict.aliases]
    if claims and not any(j.verdict.aliases for j in claims) and any(j.verdict.unsourced_number for j in claims):
        return Review(content, ungrounded=True)
    cursor = 0
    for judgement in judgements:
        if judgement.verdict.opposite is None or judgement.verdict.aliases:
            continue
        written = judgement.sentence + judgement.tags
        at = content.find(written, cursor)
        if at < 0:
            continue
        alias, said = judgement.verdict.opposite
        replacement = quoted(judgement.sentence, said, tag_for(alias))
        content = content[:at] + replacement + content[at + len(written):]
        cursor = at + len(replacement)
    return Review(content)
