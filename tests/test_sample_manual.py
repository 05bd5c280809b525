"""The sample manual's own questions, answered by the real local model through the whole graph.

Tables, a number inside a sentence, a fact in one file and its opposite nearby, a question joining
two files, Chinese, and one question the manual does not answer (it must end in "not found").
Each answer is checked against what the manual says (ragline/sample_kb/). All questions run in
one event loop, once per module; each is then its own test, so a failure names its question.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

import pytest

pytestmark = pytest.mark.local_model

TENANT = "sample-suite"


@dataclass(frozen=True)
class Check:
    question: str
    every: tuple[str, ...] = ()  # each must appear (a regular expression, case-insensitive)
    never: tuple[str, ...] = ()  # none may appear
    not_found: bool = False  # the manual does not say: the turn ends in the fallback


CHECKS = {
    "pairing": Check("How long does pairing the Aurora sensor take?", every=(r"three minutes|3 minutes",)),
    "battery-lithium": Check("How long does the outdoor sensor battery last with lithium cells?", every=(r"18 months|eighteen months",)),
    "battery-alkaline": Check("How long do alkaline batteries last in the outdoor sensor?", every=(r"12 months|twelve months",)),
    "battery-type": Check("What batteries does the outdoor sensor use?", every=(r"\bAA\b",)),
    "table-temperature": Check("What outdoor temperature range can the station measure?", every=(r"-\s?40|−40", r"\b60\b")),
    "table-humidity": Check("How accurate is the humidity reading?", every=(r"3\s?%",)),
    "table-pressure": Check("What air pressure range does the station measure?", every=(r"540", r"1100")),
    "table-wind": Check("Up to what wind speed does the station measure?", every=(r"50\s?m/s",)),
    "power": Check("How much power does the console draw?", every=(r"1\.2\s?W",)),
    "interval": Check("How often does the sensor send readings to the console?", every=(r"16 seconds",)),
    "frequency": Check("Which radio frequency does the sensor use in North America?", every=(r"915",)),
    "mast-height": Check("How high above the ground should the sensor mast be mounted?", every=(r"1\.5",)),
    "range-walls": Check("What is the radio range through walls?", every=(r"\b30\b",)),
    "wifi": Check("Which Wi-Fi networks does the console support?", every=(r"2\.4",)),
    "upload": Check("How often does the console upload readings to the cloud?", every=(r"five minutes|5 minutes",)),
    "storm": Check("What does a fall of more than 3 hPa in three hours mean?", every=(r"storm",)),
    "rain-reset": Check("How do I reset the rainfall total?", every=(r"RAIN", r"five seconds|5 seconds")),
    "dashes": Check("Why does the console show dashes instead of outdoor readings?", every=(r"radio link|link|pair",)),
    "warranty": Check("How long is the warranty on the console?", every=(r"two.year|2.year|two years|2 years",)),
    "batteries-covered": Check("Are batteries covered by the warranty?", every=(r"\bnot\b|\bno\b",), never=(r"\bare covered\b",)),
    "serial": Check("Where is the serial number printed?", every=(r"battery cover",)),
    "two-files": Check("How long does pairing take, and how long do repairs take?", every=(r"three minutes|3 minutes", r"ten working days|10 working days")),
    "zh-warranty": Check("保修期是多长时间？", every=(r"两年|2年|二年",)),
    "zh-batteries": Check("电池在保修范围内吗？", every=(r"不",)),
    "zh-height": Check("室外传感器应该安装在离地面多高的地方？", every=(r"一点五米|1\.5",)),
    "not-in-manual": Check("What does the Aurora weather station cost?", not_found=True),
}


async def _ask_all() -> dict[str, tuple[str, bool]]:
    from ragline.checkpoints.savers import memory_saver
    from ragline.contracts.request import PipelineRequest
    from ragline.evaluation.answers import ask, warm_up
    from ragline.graph.graphs import build_graph
    from ragline.ingestion.sample import ensure_sample_kb
    from ragline.services import Services

    services = Services()
    try:
        kb = await ensure_sample_kb(services.retrieval, TENANT)
        graph = build_graph("ragline", checkpointer=memory_saver())
        await warm_up(services)
        answers = {}
        for name, check in CHECKS.items():
            request = PipelineRequest(query=check.question, knowledge_base_ids=(kb.id,))
            turn = await ask(graph, services, request, TENANT)
            assert turn.error is None, f"{name}: {turn.error}"
            answers[name] = (turn.answer, turn.fallback)
        return answers
    finally:
        await services.aclose()


@pytest.fixture(scope="module")
def answers(monkeypatch_module) -> dict[str, tuple[str, bool]]:
    return asyncio.run(_ask_all())


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        for name in ("RAGLINE_CHAT_MODEL", "RAGLINE_CHAT_API_BASE", "RAGLINE_CHAT_API_KEY"):
            patch.delenv(name, raising=False)  # the local default model, whatever the shell exports
        from ragline.settings import get_settings

        get_settings.cache_clear()
        yield patch
        get_settings.cache_clear()


# Right only through grounding (citations/grounding.py): the 1.5B model answers "Yes, batteries are
# covered" (and 电池在保修范围内) after reading that they are not, and invents a price; the answers
# kept are the manual's own sentence, quoted, and "not found". "dashes" is right through the system
# prompt's heading rule: before it, the model named the section's last sentence (cold weather
# drains batteries) as the cause instead of the first under the heading (the radio link is lost).
GROUNDED = ("batteries-covered", "zh-batteries", "not-in-manual")


@pytest.mark.parametrize("name", CHECKS)
def test_the_local_model_answers_the_sample_manual_right(answers, name):
    from ragline.evaluation.scoring import strip_tags

    check = CHECKS[name]
    raw, fallback = answers[name]
    text = strip_tags(raw)
    if check.not_found:
        assert fallback, f"{check.question!r} should end in 'not found', got {text!r}"
        return
    assert not fallback, f"{check.question!r} ended in 'not found' although the manual answers it"
    for pattern in check.every:
        assert re.search(pattern, text, re.IGNORECASE), f"{check.question!r}: {text!r} lacks {pattern!r}"
    for pattern in check.never:
        assert not re.search(pattern, text, re.IGNORECASE), f"{check.question!r}: {text!r} says {pattern!r}"


def test_every_question_of_the_suite_was_asked(answers):
    assert set(answers) == set(CHECKS) and len(CHECKS) >= 20


def test_the_answers_grounding_corrects_cite_the_manuals_own_sentence(answers):
    """A wrong answer with a source badge looks checked, worse than "not found": the two warranty
    answers the model got backwards are the manual's sentence with its source, the price "not found"."""
    from ragline.evaluation.scoring import citations

    assert all(citations(answers[name][0]) for name in GROUNDED if name != "not-in-manual")
    assert answers["not-in-manual"][1]
