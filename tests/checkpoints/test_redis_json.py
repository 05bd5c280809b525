"""checkpoints/redis_json.py: orjson in RedisJSON commands gives the same documents as the stdlib."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from ragline.checkpoints import redis_json
from ragline.checkpoints.redis_json import DECODER, ENCODER, OrjsonRedis
from ragline.checkpoints.savers import redis_saver
from ragline.graph.context import RunContext
from ragline.graph.graphs import build_graph
from ragline.graph.request import PipelineRequest
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


async def test_the_redis_checkpointer_writes_and_reads_checkpoints_with_orjson(redis_server, scripted_model, monkeypatch):
    encoded: list[int] = []
    real = redis_json.OrjsonEncoder.encode
    monkeypatch.setattr(redis_json.OrjsonEncoder, "encode", lambda self, value: encoded.append(1) or real(self, value))
    scripted_model.on(lambda body: True, Reply(chunks=["Fine."]))
    redis_server.flush()
    async with redis_saver(redis_server.url) as saver:
        graph = build_graph("ragline", checkpointer=saver)
        context = RunContext(session_id="s", request_id="r", user_message_id="u", assistant_message_id="a", services=Services())
        request = PipelineRequest(query="How are you?", rewrite_enabled=False)
        async for _ in graph.astream({"request": request}, threads.thread_config("s"), context=context,
                                     stream_mode="custom", durability="sync"):
            pass
        assert encoded, "checkpoints went through the stdlib JSON encoder"
        assert [m.content for m in await threads.messages_of(graph, "s")] == ["How are you?", "Fine."]
