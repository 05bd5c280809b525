"""Stop: ownership-checked, the stop event in the stream, the partial answer saved as shown."""

from __future__ import annotations

from tests.api.live import answer_of, collect, frames, new_session, types
from tests.scripted_model import Reply

ASK = {"query": "Tell me a long story", "rewrite_enabled": False}
LONG = [f"w{i} " for i in range(200)]


async def _stop_after(client, sid: str, deltas: int, body: dict | None = None) -> list:
    got = []
    async with client.stream("POST", f"/api/v1/sessions/{sid}/chat", json=ASK) as response:
        async for frame in frames(response):
            got.append(frame)
            if types(got).count("answer") == deltas and "stop" not in types(got):
                stopped = await client.post(f"/api/v1/sessions/{sid}/stop", json=body or {})
                assert stopped.status_code == 200 and stopped.json()["stopped"] is True
    return got


async def test_stop_ends_the_stream_and_saves_the_partial_answer_as_shown(client, scripted_model):
    scripted_model.on(lambda b: True, Reply(chunks=LONG, chunk_delay=0.05))
    sid = await new_session(client, title="t")
    got = await _stop_after(client, sid, 3)
    assert "stop" in types(got) and types(got)[-1] == "complete"
    assert got[-1].event["data"] == {"stopped": True}
    shown = answer_of(got)
    assert shown and len(shown) < len("".join(LONG)) / 2
    assert types(got)[types(got).index("stop") :].count("answer") <= 1  # nothing streams after the stop but the end marker
    messages = (await client.get(f"/api/v1/sessions/{sid}/messages")).json()["items"]
    assert messages[-1]["role"] == "assistant" and messages[-1]["stopped"] is True
    assert messages[-1]["content"] == shown and messages[-1]["is_completed"]


async def test_a_model_that_stalls_is_cancelled_hard_and_its_partial_answer_kept(client, scripted_model):
    scripted_model.on(lambda b: True, Reply(chunks=["first ", "second ", "never"], chunk_delay=3))
    sid = await new_session(client, title="t")
    got = await _stop_after(client, sid, 1)
    assert types(got)[-1] == "complete" and answer_of(got) == "first "
    messages = (await client.get(f"/api/v1/sessions/{sid}/messages")).json()["items"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[-1]["content"] == "first " and messages[-1]["stopped"] is True
    after = await collect(client, "POST", f"/api/v1/sessions/{sid}/chat", json={**ASK, "query": "again"}, limit=1)
    assert after[0].type == "agent_query"  # the session takes new questions


async def test_stop_with_nothing_running_is_a_conflict_and_a_finished_answer_is_not_stopped(client, scripted_model):
    sid = await new_session(client, title="t")
    assert (await client.post(f"/api/v1/sessions/{sid}/stop", json={})).status_code == 409
    got = await collect(client, "POST", f"/api/v1/sessions/{sid}/chat", json=ASK)
    done = await client.post(f"/api/v1/sessions/{sid}/stop", json={"message_id": got[0].event["assistant_message_id"]})
    assert done.status_code == 200 and done.json()["stopped"] is False
    unknown = await client.post(f"/api/v1/sessions/{sid}/stop", json={"message_id": "nope"})
    assert unknown.status_code == 404


async def test_a_stop_before_the_answer_began_leaves_no_answer_text(client, scripted_model):
    scripted_model.on(lambda b: True, Reply(reasoning=["let me think"], chunks=["too late"], chunk_delay=1.0))
    sid = await new_session(client, title="t")
    got = []
    async with client.stream("POST", f"/api/v1/sessions/{sid}/chat", json=ASK) as response:
        async for frame in frames(response):
            got.append(frame)
            if frame.type == "thinking" and "stop" not in types(got):
                assert (await client.post(f"/api/v1/sessions/{sid}/stop", json={})).status_code == 200
    assert answer_of(got) == "" and got[-1].event["data"] == {"stopped": True}
    saved = (await client.get(f"/api/v1/sessions/{sid}/messages")).json()["items"][-1]
    assert saved["role"] == "assistant" and saved["content"] == "" and saved["stopped"] is True
