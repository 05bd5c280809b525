import pytest

from ragline.models.chat import ChatClient, ChatModelError, ChatOptions, StreamEnd
from tests.scripted_model import Reply


def _client(server):
    return ChatClient("openai/scripted", api_base=server.base_url, api_key="k")


async def test_stream_ends_with_exactly_one_stream_end(scripted_server):
    scripted_server.rules.clear()
    scripted_server.on(lambda b: True, Reply(chunks=["a", "b"], double_finish=True, finish_reason="stop"))
    items = [item async for item in _client(scripted_server).stream([{"role": "user", "content": "q"}])]
    ends = [i for i in items if isinstance(i, StreamEnd)]
    assert len(ends) == 1 and ends[0].finish_reason == "stop" and items[-1] is ends[0]


async def test_reasoning_content_comes_out_as_thinking(scripted_server):
    scripted_server.rules.clear()
    scripted_server.on(lambda b: True, Reply(reasoning=["r1"], chunks=["x"]))
    items = [item async for item in _client(scripted_server).stream([{"role": "user", "content": "q"}])]
    assert [(i.kind, i.text) for i in items if not isinstance(i, StreamEnd)] == [("thinking", "r1"), ("answer", "x")]


async def test_provider_failure_raises_chat_model_error(scripted_server):
    scripted_server.rules.clear()
    scripted_server.on(lambda b: True, Reply(status=400, error="nope"))
    with pytest.raises(ChatModelError, match="nope"):
        await _client(scripted_server).chat([{"role": "user", "content": "q"}])


def test_thinking_option_maps_to_reasoning_effort_and_unset_options_are_omitted():
    assert ChatOptions(thinking=True).litellm_kwargs() == {"reasoning_effort": "medium"}
    assert ChatOptions().litellm_kwargs() == {}
