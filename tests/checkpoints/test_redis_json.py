"""checkpoints/redis_json.py: orjson in RedisJSON commands gives the same documents as the stdlib."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragline.checkpoints import redis_json
from ragline.checkpoints.redis_json import DECODER, ENCODER, OrjsonPipeline, OrjsonRedis
from ragline.checkpoints.savers import redis_saver, redis_serializer
from ragline.contracts.context import RunContext, RunHost
from ragline.contracts.request import PipelineRequest
from ragline.graph.graphs import build_graph
from ragline.service import threads
from ragline.services import Services
from tests.scripted_model import Reply


def json_values(int_bits: int) -> st.SearchStrategy:
    bound = 2 ** (int_bits - 1)
    return st.recursive(
        st.none() | st.booleans() | st.integers(min_value=-bound, max_value=bound - 1)
        | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
        lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
        max_leaves=30,
    )


@given(json_values(int_bits=80))  # beyond 64 bits the encoder falls back to the stdlib
def test_encoding_reads_back_as_the_stdlib_encoding_does(value):
    assert json.loads(ENCODER.encode(value)) == json.loads(json.dumps(value))


@given(json_values(int_bits=64))  # RedisJSON's numbers are 64-bit: it never returns a larger integer
def test_decoding_agrees_with_the_stdlib_for_text_and_bytes(value):
    text = json.dumps(value)
    assert DECODER.decode(text) == json.loads(text)
    assert DECODER.decode(text.encode()) == json.loads(text)


async def test_json_commands_and_pipelines_round_trip_through_redis(redis_server):
    client = OrjsonRedis.from_url(redis_server.url)
    try:
        document = {"a": [1, 2.5, "é", None, True], "b": {"c": {}}, 7: "non-string key"}
        await client.json().set("doc:1", "$", document)
        pipe = client.pipeline(transaction=False)
        pipe.json().set("doc:2", "$", {"z": [1]})
        pipe.json().get("doc:2")
        assert await pipe.execute() == [True, {"z": [1]}]
        assert await client.json().get("doc:1") == {"a": [1, 2.5, "é", None, True], "b": {"c": {}}, "7": "non-string key"}
    finally:
        await client.aclose()


async def test_a_pipeline_used_first_still_reads_json_replies(redis_server):
    client = OrjsonRedis.from_url(redis_server.url)
    try:
        pipe = client.pipeline(transaction=False)
        pipe.json().set("doc:first", "$", {"z": [1]})
        pipe.json().get("doc:first")
        assert await pipe.execute() == [True, {"z": [1]}]
    finally:
        await client.aclose()


async def test_a_pipelines_json_commands_register_no_reply_callbacks_again(redis_server, monkeypatch):
    """A pipeline per checkpoint write: its JSON commands reuse the client's, whose callbacks are in place."""
    client = OrjsonRedis.from_url(redis_server.url)
    try:
        client.json()
        registered: list[str] = []
        monkeypatch.setattr(type(client), "set_response_callback", lambda self, command, callback: registered.append(command))
        monkeypatch.setattr(OrjsonPipeline, "set_response_callback", lambda self, command, callback: registered.append(command), raising=False)
        pipe = client.pipeline(transaction=False)
        pipe.json().set("doc:3", "$", {"n": 3})
        assert client.pipeline(transaction=False).json() is not pipe.json()  # each is bound to its own pipeline
        assert registered == [] and await pipe.execute() == [True]
        assert await client.json().get("doc:3") == {"n": 3}
    finally:
        await client.aclose()


async def test_the_redis_checkpointer_writes_and_reads_checkpoints_with_orjson(redis_server, scripted_model, monkeypatch):
    encoded: list[int] = []
    real = redis_json.OrjsonEncoder.encode
    monkeypatch.setattr(redis_json.OrjsonEncoder, "encode", lambda self, value: encoded.append(1) or real(self, value))
    scripted_model.on(lambda body: True, Reply(chunks=["Fine."]))
    redis_server.flush()
    async with redis_saver(redis_server.url) as saver:
        graph = build_graph("ragline", checkpointer=saver)
        context = RunContext(session_id="s", request_id="r", user_message_id="u", assistant_message_id="a", host=RunHost(services=Services()))
        request = PipelineRequest(query="How are you?", rewrite_enabled=False)
        async for _ in graph.astream({"request": request}, threads.thread_config("s"), context=context,
                                     stream_mode="custom", durability="sync"):
            pass
        assert encoded, "checkpoints went through the stdlib JSON encoder"
        assert [m.content for m in await threads.messages_of(graph, "s")] == ["How are you?", "Fine."]


def _serializer(cache_size: int = 100):
    from ragline.checkpoints.redis_json import message_caching_serializer

    return message_caching_serializer([], [], cache_size=cache_size)


def _conversation(turns: int) -> dict:
    from langchain_core.messages import AIMessage, HumanMessage

    messages = [m for n in range(turns) for m in (HumanMessage(f"question {n}", id=f"u{n}"), AIMessage(f"answer {n}", id=f"a{n}"))]
    return {"channel_values": {"messages": messages}}


@pytest.mark.parametrize("make", [_serializer, redis_serializer], ids=["caching serializer", "the Redis checkpointer's"])
def test_each_message_is_encoded_once_however_many_checkpoints_hold_it(monkeypatch, make):
    from langchain_core.load.serializable import Serializable

    calls: list[str] = []
    real = Serializable.to_json
    monkeypatch.setattr(Serializable, "to_json", lambda self: calls.append(self.id) or real(self))
    serde, state = make(), _conversation(5)
    first = serde.dumps_typed(state)
    assert len(calls) == 10
    assert serde.dumps_typed(state) == first and len(calls) == 10  # the next step's checkpoint: nothing encoded again


def test_a_message_replaced_under_the_same_id_is_encoded_anew():
    from langchain_core.messages import AIMessage

    serde, state = _serializer(), _conversation(1)
    serde.dumps_typed(state)
    state["channel_values"]["messages"][1] = AIMessage("a corrected answer", id="a0")
    assert b"a corrected answer" in serde.dumps_typed(state)[1]
    state["channel_values"]["messages"][1].content = "changed in place"  # nothing does this; if it did, it shows
    assert b"changed in place" in serde.dumps_typed(state)[1]


def test_a_message_is_revived_once_and_reads_back_equal():
    serde, state = _serializer(), _conversation(3)
    encoded = serde.dumps_typed(state)
    fresh = _serializer()  # another process: nothing cached from the encoding
    first, second = fresh.loads_typed(encoded), fresh.loads_typed(encoded)
    assert first["channel_values"]["messages"] == state["channel_values"]["messages"]
    assert all(a is b for a, b in zip(first["channel_values"]["messages"], second["channel_values"]["messages"]))


def test_the_caches_stay_within_their_size():
    serde = _serializer(cache_size=4)
    encoded = serde.dumps_typed(_conversation(10))
    serde.loads_typed(encoded)
    assert len(serde._messages) <= 4 and len(serde._revived) <= 4
