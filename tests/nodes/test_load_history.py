from langchain_core.messages import AIMessage, HumanMessage

from ragline.contracts.request import PipelineRequest
from ragline.graph.routes import has_history
from ragline.nodes.load_history import pair_history


def _round(request_id, question, answer):
    return [
        HumanMessage(question, additional_kwargs={"request_id": request_id}),
        AIMessage(answer, additional_kwargs={"request_id": request_id, "references": [{"id": "c1"}]}),
    ]


def test_rounds_pair_by_request_id_oldest_first():
    messages = _round("r1", "q1", "a1") + _round("r2", "q2", "a2")
    assert [(t.query, t.answer) for t in pair_history(messages, 5)] == [("q1", "a1"), ("q2", "a2")]


def test_only_the_last_max_rounds_are_kept():
    messages = [m for i in range(6) for m in _round(f"r{i}", f"q{i}", f"a{i}")]
    assert [t.query for t in pair_history(messages, 2)] == ["q4", "q5"]


def test_zero_or_negative_rounds_load_nothing():
    messages = _round("r1", "q1", "a1")
    assert pair_history(messages, 0) == [] and pair_history(messages, -1) == []


def test_think_blocks_are_stripped_from_answers():
    messages = _round("r1", "q1", "<think>hidden reasoning</think>Visible answer")
    assert pair_history(messages, 5)[0].answer == "Visible answer"


def test_unpaired_and_current_messages_are_skipped():
    messages = [HumanMessage("lost", additional_kwargs={"request_id": "r0"})] + _round("r1", "q1", "a1")
    messages += [HumanMessage("current", additional_kwargs={"request_id": "r2"})]
    assert [t.query for t in pair_history(messages, 5, current_request_id="r2")] == ["q1"]


def test_original_content_not_rendered_content_is_replayed():
    user = HumanMessage("original question", additional_kwargs={"request_id": "r1", "rendered_content": "CONTEXTS ... original question"})
    turns = pair_history([user, AIMessage("a", additional_kwargs={"request_id": "r1"})], 5)
    assert turns[0].query == "original question"


def test_references_travel_with_the_round():
    assert pair_history(_round("r1", "q", "a"), 5)[0].references == ({"id": "c1"},)


def test_has_history_needs_an_earlier_answer_and_multi_turn_on():
    state = {"request": PipelineRequest(query="q"), "messages": _round("r1", "q", "a")}
    assert has_history(state)
    assert not has_history({**state, "request": PipelineRequest(query="q", max_history_rounds=0)})
    assert not has_history({**state, "messages": state["messages"][:1]})


def test_a_conversation_written_elsewhere_pairs_each_question_with_the_next_answer():
    """Studio's chat or a parent graph sends messages without request ids; an agent's tool-call
    message (no text) is no answer."""
    messages = [
        HumanMessage("q1"), AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "c1"}]), AIMessage("a1"),
        HumanMessage("q2"), HumanMessage("q3"), AIMessage("a3"),
        HumanMessage("now", additional_kwargs={"request_id": "current"}),
    ]
    assert [(t.query, t.answer) for t in pair_history(messages, 5, current_request_id="current")] == [("q1", "a1"), ("q3", "a3")]


def test_history_reads_ten_messages_beyond_its_rounds_and_no_further():
    """Seed: max_rounds*2 + 10 messages are read, so unpaired turns cost a round only past that slack."""
    unpaired = [HumanMessage(f"lost {i}", additional_kwargs={"request_id": f"x{i}"}) for i in range(10)]
    messages = _round("r0", "q0", "a0") + unpaired + _round("r1", "q1", "a1")  # 14 = 2*2 + 10 messages
    assert [t.query for t in pair_history(messages, 2)] == ["q0", "q1"]
    one_more = _round("r0", "q0", "a0") + unpaired + [HumanMessage("lost 10", additional_kwargs={"request_id": "x10"})] + _round("r1", "q1", "a1")
    assert [t.query for t in pair_history(one_more, 2)] == ["q1"]  # the 15th message from the end is not read
