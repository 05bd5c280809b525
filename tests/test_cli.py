"""The ragline command, run as a user runs it (a subprocess), against the scripted model."""

import os
import subprocess
import sys


def _ragline(*args, env_extra=None, stdin=None):
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "ragline", *args], capture_output=True, text=True, env=env, input=stdin, timeout=120)


def _scripted_env(server):
    return {"RAGLINE_CHAT_MODEL": "openai/scripted", "RAGLINE_CHAT_API_BASE": server.base_url, "RAGLINE_CHAT_API_KEY": "k"}


def test_ask_streams_the_answer_to_stdout_and_says_it_searched_nothing(scripted_model):
    scripted_model.on(lambda b: True, __import__("tests.scripted_model", fromlist=["Reply"]).Reply.text("Paris is the capital."))
    result = _ragline("ask", "What is the capital of France?", env_extra=_scripted_env(scripted_model))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Paris is the capital."
    assert "no knowledge base was searched" in result.stderr and "--kb NAME" in result.stderr


def test_provider_error_is_one_line_on_stderr_with_non_zero_exit(scripted_model):
    from tests.scripted_model import Reply

    scripted_model.on(lambda b: True, Reply(status=400, error="quota exceeded"))
    result = _ragline("ask", "q", env_extra=_scripted_env(scripted_model))
    assert result.returncode == 1
    assert "quota exceeded" in result.stderr and "Traceback" not in result.stderr


def test_bad_input_is_a_one_line_error():
    result = _ragline("ask", "   ")
    assert result.returncode == 2
    assert result.stderr.startswith("ragline:") and "Traceback" not in result.stderr


def test_chat_keeps_the_conversation_between_turns(scripted_model):
    from tests.scripted_model import Reply

    scripted_model.on(lambda b: True, Reply.text("ok"))
    result = _ragline("chat", env_extra=_scripted_env(scripted_model), stdin="My name is Ada.\nWhat is my name?\n\n")
    assert result.returncode == 0, result.stderr
    last = [m["content"] for m in scripted_model.requests[-1]["messages"]]
    assert last[1:] == ["My name is Ada.", "ok", "What is my name?"]


def test_an_unknown_knowledge_base_name_is_a_one_line_error():
    result = _ragline("ask", "--kb", "no-such-kb", "q")
    assert result.returncode == 2
    assert "no-such-kb" in result.stderr and "Traceback" not in result.stderr


def test_citations_print_as_footnotes_with_their_sources():
    import io

    from ragline.commands.terminal import TerminalPrinter
    from ragline.contracts import events
    from ragline.contracts.state import TurnIds

    out = io.StringIO()
    printer = TerminalPrinter(out, io.StringIO(), color=False)
    turn = TurnIds("s", "r", "u", "a")
    printer(events.answer(turn, 'Pairing takes three minutes <kb chunk_id="c9" title="setup"/>.'))
    printer(events.complete(turn))
    assert out.getvalue() == "Pairing takes three minutes [1].\n[1] setup\n"


def test_a_sentence_no_passage_supports_prints_a_question_mark_explained_under_the_sources():
    import io

    from ragline.citations.tags import UNSUPPORTED_MARK
    from ragline.commands.terminal import UNSUPPORTED_NOTE, TerminalPrinter
    from ragline.contracts import events
    from ragline.contracts.state import TurnIds

    out = io.StringIO()
    printer = TerminalPrinter(out, io.StringIO(), color=False)
    turn = TurnIds("s", "r", "u", "a")
    printer(events.answer(turn, 'Pairing takes three minutes <kb chunk_id="c9" title="setup" attributed="true"/>.'))
    printer(events.answer(turn, f" It costs 99 euros.{UNSUPPORTED_MARK}"))
    printer(events.complete(turn))
    assert out.getvalue() == (f"Pairing takes three minutes [1~]. It costs 99 euros.[?]\n"
                              f"[1] setup (matched by Ragline, not cited by the model)\n{UNSUPPORTED_NOTE}\n")


def test_a_footnote_names_the_page_or_heading_path_of_its_passage():
    import io

    from ragline.commands.terminal import TerminalPrinter
    from ragline.contracts import events
    from ragline.contracts.state import TurnIds

    out = io.StringIO()
    printer = TerminalPrinter(out, io.StringIO(), color=False)
    turn = TurnIds("s", "r", "u", "a")
    printer(events.references(turn, [{"chunk_id": "c9", "location": {"pages": [2, 3], "headings": [], "start": 5, "end": 90}},
                                     {"chunk_id": "c4", "location": {"pages": [], "headings": ["Setup", "Pairing"], "start": 0, "end": 9}}]))
    printer(events.answer(turn, 'Forty seconds <kb chunk_id="c9" title="manual"/>, then beeps <kb chunk_id="c4" title="setup"/>.'))
    printer(events.complete(turn))
    assert out.getvalue() == "Forty seconds [1], then beeps [2].\n[1] manual, pp. 2-3\n[2] setup, Setup > Pairing\n"


def test_an_answer_over_a_knowledge_base_carries_no_unsearched_note():
    import io

    from ragline.commands.terminal import UNSEARCHED_NOTE, TerminalPrinter
    from ragline.contracts import events
    from ragline.contracts.state import TurnIds

    turn = TurnIds("s", "r", "u", "a")
    for searched in (True, False):
        err = io.StringIO()
        printer = TerminalPrinter(io.StringIO(), err, color=False, searched=searched)
        printer(events.answer(turn, "Two years."))
        printer(events.complete(turn))
        assert (UNSEARCHED_NOTE in err.getvalue()) is not searched


def test_a_matched_source_prints_as_a_marked_footnote_and_is_listed_as_matched():
    import io

    from ragline.commands.terminal import TerminalPrinter
    from ragline.contracts import events
    from ragline.contracts.state import TurnIds

    out = io.StringIO()
    printer = TerminalPrinter(out, io.StringIO(), color=False)
    turn = TurnIds("s", "r", "u", "a")
    printer(events.answer(turn, 'Pairing takes three minutes <kb chunk_id="c9" title="setup"/>. Hold the button.'))
    printer(events.answer(turn, '<kb chunk_id="c9" title="setup" attributed="true"/> Two years.'))
    printer(events.answer(turn, '<kb chunk_id="w2" title="warranty" attributed="true"/>'))
    printer(events.complete(turn))
    assert out.getvalue() == (
        "Pairing takes three minutes [1]. Hold the button.[1~] Two years.[2~]\n"
        "[1] setup\n[2] warranty (matched by Ragline, not cited by the model)\n"
    )


def test_agent_mode_shows_each_tool_call_and_result_on_stderr_and_the_pipeline_shows_none():
    import io

    from ragline.commands.terminal import TerminalPrinter
    from ragline.contracts import events
    from ragline.contracts.events import ProgressWindow
    from ragline.contracts.state import TurnIds

    turn = TurnIds("s", "r", "u", "a")
    out, err = io.StringIO(), io.StringIO()
    agent = TerminalPrinter(out, err, color=False, agent=True)
    for event in (events.answer(turn, "Let me look."), events.thought(turn, "Let me look.", segment=0),
                  events.agent_tool_call(turn, "s1", "search_knowledge", {"query": "pairing"}),
                  events.agent_tool_result(turn, "s1", "search_knowledge", success=False, error="timeout"),
                  events.answer(turn, "Three minutes."), events.complete(turn)):
        agent(event)
    assert (out.getvalue(), err.getvalue()) == ("Let me look.\nThree minutes.\n", '  -> search_knowledge(query="pairing")\n     failed: timeout\n')

    out, err = io.StringIO(), io.StringIO()
    pipeline = TerminalPrinter(out, err, color=False)
    for event in (events.tool_call(turn, ProgressWindow("knowledge_search"), {"query": "pairing"}),
                  events.tool_result(turn, ProgressWindow("knowledge_search"), success=True), events.answer(turn, "Three minutes."),
                  events.complete(turn)):
        pipeline(event)
    assert (out.getvalue(), err.getvalue()) == ("Three minutes.\n", "")
