"""Tool calling in the chat client: schemas sent, text streamed, calls returned with parsed arguments."""

from __future__ import annotations

import pytest

from ragline.models.chat import ChatClient, StreamEnd, ToolCallingUnsupported
from ragline.models.tool_calls import ToolCallAccumulator
from tests.scripted_model import Reply, ScriptedCall

SEARCH = {"type": "function", "function": {"name": "search_knowledge", "description": "Search.",
                                           "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}}
ASK = [{"role": "user", "content": "where is the reset button?"}]


def _client(server, *, direct: bool | None = None) -> ChatClient:
    return ChatClient("openai/scripted", api_base=server.base_url, api_key="k", direct=direct)


async def _streamed(client: ChatClient) -> tuple[str, StreamEnd]:
    items = [item async for item in client.stream(ASK, tools=[SEARCH])]
    end = items[-1]
    assert isinstance(end, StreamEnd)
    return "".join(i.text for i in items[:-1] if not isinstance(i, StreamEnd) and i.kind == "answer"), end


@pytest.mark.parametrize("direct", [None, False], ids=["direct", "litellm"])
async def test_a_streamed_reply_gives_its_text_then_its_calls_with_parsed_arguments(scripted_server, direct):
    scripted_server.reset()
    scripted_server.on(lambda b: True, Reply.calling(ScriptedCall("search_knowledge", {"query": "reset button"}, id="call_a"),
                                                     ScriptedCall("search_knowledge", {"query": "sensor"}, id="call_b"),
                                                     text="Let me look that up."))
    text, end = await _streamed(_client(scripted_server, direct=direct))
    assert text == "Let me look that up."
    assert end.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.arguments, c.error) for c in end.tool_calls] == [
        ("call_a", "search_knowledge", {"query": "reset button"}, ""), ("call_b", "search_knowledge", {"query": "sensor"}, "")]
    assert scripted_server.requests[-1]["tools"] == [SEARCH]


@pytest.mark.parametrize("direct", [None, False], ids=["direct", "litellm"])
async def test_a_whole_reply_gives_its_calls(scripted_server, direct):
    scripted_server.reset()
    scripted_server.on(lambda b: True, Reply.calling(ScriptedCall("read_chunks", {"chunk_ids": ["x1"]}, id="c1")))
    result = await _client(scripted_server, direct=direct).chat(ASK, tools=[SEARCH])
    assert result.content == "" and [(c.id, c.name, c.arguments) for c in result.tool_calls] == [("c1", "read_chunks", {"chunk_ids": ["x1"]})]
    assert scripted_server.requests[-1]["tools"] == [SEARCH]


async def test_malformed_arguments_become_that_calls_error_not_a_crash(scripted_server):
    scripted_server.reset()
    scripted_server.on(lambda b: True, Reply.calling(ScriptedCall("search_knowledge", '{"query": "reset', id="bad"),
                                                     ScriptedCall("search_knowledge", "[1, 2]", id="list"),
                                                     ScriptedCall("search_knowledge", {"query": "ok"}, id="good")))
    _, end = await _streamed(_client(scripted_server))
    bad, listed, good = end.tool_calls
    assert "not valid JSON" in bad.error and bad.arguments == {} and bad.raw_arguments == '{"query": "reset'
    assert "must be a JSON object" in listed.error
    assert good.error == "" and good.arguments == {"query": "ok"}


async def test_a_reply_without_calls_ends_with_none_and_a_plain_stream_sends_no_tools(scripted_server):
    scripted_server.reset()
    scripted_server.on(lambda b: True, Reply.text("The button is on the back."))
    text, end = await _streamed(_client(scripted_server))
    assert text == "The button is on the back." and end.tool_calls == () and end.finish_reason == "stop"
    [item async for item in _client(scripted_server).stream(ASK)]
    assert "tools" not in scripted_server.requests[-1]


async def test_the_local_model_refuses_tools_with_a_clear_error():
    client = ChatClient("ragline/qwen2.5-coder-1.5b-instruct")
    assert not client.supports_tools
    with pytest.raises(ToolCallingUnsupported, match="agent mode needs a model with tool calling; the local model"):
        [item async for item in client.stream(ASK, tools=[SEARCH])]
    with pytest.raises(ToolCallingUnsupported):
        await client.chat(ASK, tools=[SEARCH])


def test_the_accumulator_joins_pieces_by_index_and_names_a_call_without_id():
    calls = ToolCallAccumulator()
    calls.feed([{"index": 1, "function": {"name": "b", "arguments": '{"x"'}}])
    calls.feed([{"index": 0, "id": "first", "function": {"name": "a", "arguments": ""}}])
    calls.feed([{"index": 1, "function": {"arguments": ': 1}'}}])
    calls.feed(None)
    assert [(c.id, c.name, c.arguments) for c in calls.calls()] == [("first", "a", {}), ("call_1", "b", {"x": 1})]
