"""continue-stream coalescing, the client's transcript, and the filter of a resumed run."""

from __future__ import annotations

from ragline.checkpoints.streams import StreamEntry
from ragline.service.replay import Transcript, coalesce
from ragline.service.resume import ResumeFilter


def answer(text: str, **extra) -> dict:
    return {"id": "r", "response_type": "answer", "content": text, **extra}


def thinking(text: str) -> dict:
    return {"id": "r", "response_type": "thinking", "content": text}


def entries(*events: dict) -> list[StreamEntry]:
    return [StreamEntry(str(i + 1), event) for i, event in enumerate(events)]


def test_consecutive_answer_deltas_replay_as_one_frame_with_the_last_id():
    log = entries({"response_type": "agent_query", "id": "r"}, answer("a"), answer("b"), answer("c"), answer("", done=True))
    merged = coalesce(log)
    assert [e.event.get("content") for e in merged] == [None, "abc", ""]
    assert [e.id for e in merged] == ["1", "4", "5"]


def test_thinking_and_answer_runs_are_coalesced_separately():
    merged = coalesce(entries(thinking("x"), thinking("y"), answer("a"), answer("b"), thinking("z")))
    assert [(e.event["response_type"], e.event["content"]) for e in merged] == [
        ("thinking", "xy"), ("answer", "ab"), ("thinking", "z")
    ]


def test_events_with_data_are_never_merged():
    merged = coalesce(entries(answer("a"), answer("b", data={"replace": True}), answer("c")))
    assert len(merged) == 3


def test_the_transcript_appends_deltas_and_honours_a_replace():
    shown = Transcript.of([answer("Hel"), answer("lo"), answer("Goodbye", data={"replace": True}), answer("!")])
    assert shown.answer == "Goodbye!"


def test_a_resumed_identical_generation_sends_only_the_rest():
    delivered = Transcript.of([answer("The "), answer("capital ")])
    keep = ResumeFilter(delivered)
    out = [keep(answer(t)) for t in ["The ", "capi", "tal is ", "Paris"]]
    sent = [e["content"] for e in out if e is not None]
    assert "".join(sent) == "is Paris"
    assert delivered.answer + "".join(sent) == "The capital is Paris"


def test_a_resumed_generation_that_diverges_supersedes_the_partial_answer_once():
    keep = ResumeFilter(Transcript.of([answer("The capital of")]))
    first = keep(answer("Paris "))
    assert first is not None and first["data"]["replace"] is True and first["content"] == "Paris "
    assert keep(answer("is it")) == answer("is it")


def test_non_text_events_already_delivered_are_dropped_once():
    card = {"response_type": "tool_call", "data": {"tool_name": "query_understand"}}
    keep = ResumeFilter(Transcript.of([card]))
    assert keep(dict(card)) is None
    assert keep(dict(card)) == card
