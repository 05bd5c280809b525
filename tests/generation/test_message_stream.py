"""generation/message_stream.py: answer tokens on LangGraph's messages stream, as a chat model's."""

from langchain_core.messages import AIMessage, AIMessageChunk

from ragline.checkpoints.savers import memory_saver
from ragline.contracts.context import RunContext, RunHost
from ragline.contracts.request import PipelineRequest
from ragline.contracts.state import TurnIds
from ragline.generation.message_stream import AnswerChunks
from ragline.graph.graphs import build_graph
from ragline.services import Services
from tests.scripted_model import Reply


async def _stream(graph, graph_input, thread: str, **kwargs):
    items = []
    async for mode, item in graph.astream(graph_input, {"configurable": {"thread_id": thread}}, stream_mode=["messages", "custom"],
                                          context=RunContext(host=RunHost(services=Services())), **kwargs):
        items.append((mode, item))
    return items


async def test_the_answer_streams_as_chunks_of_the_assistant_message_from_its_stage(scripted_model):
    scripted_model.on(lambda b: True, Reply(chunks=["Ber", "lin", " it is."], reasoning=["Capital", " of Germany"]))
    items = await _stream(build_graph("ragline", checkpointer=memory_saver()), {"request": PipelineRequest(query="Capital of Germany?")}, "m1")
    chunks = [(message, meta) for mode, (message, meta) in (i for i in items if i[0] == "messages")]
    answer = [m for m, _ in chunks if isinstance(m, AIMessageChunk) and m.content]
    assert [m.content for m in answer] == ["Ber", "lin", " it is."]
    assert {meta["langgraph_node"] for m, meta in chunks if m.type != "human"} == {"chat_completion_stream"}  # the question: begin_turn's
    assert [m.additional_kwargs["reasoning_content"] for m, _ in chunks if m.additional_kwargs.get("reasoning_content")] == ["Capital", " of Germany"]
    events = [item for mode, item in items if mode == "custom" and item["response_type"] == "answer" and item.get("content")]
    assert {m.id for m, _ in chunks if m.type != "human"} == {events[0]["assistant_message_id"]}
    # the whole AIMessage shares the chunks' id, so it is not sent again
    assert not [m for m, _ in chunks if isinstance(m, AIMessage) and not isinstance(m, AIMessageChunk)]


async def test_a_fixed_fallback_answer_streams_as_one_chunk(scripted_model):
    graph = build_graph("ragline_chat")
    request = {"messages": [("user", "hello")]}
    items = await _stream(graph, request, "m2")
    texts = [message.content for mode, (message, _) in (i for i in items if i[0] == "messages") if isinstance(message, AIMessageChunk)]
    assert texts and "<" not in "".join(texts)


def test_nothing_is_pushed_outside_a_messages_stream():
    chunks = AnswerChunks(TurnIds("s", "r", "u", "a"))
    assert chunks.active is False
    chunks.answer("text")  # a no-op, not an error
