import argparse

import pytest

from ragline.commands import memory
from ragline.settings import get_settings


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGLINE_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    parser = argparse.ArgumentParser(prog="ragline")
    memory.register(parser.add_subparsers(dest="command", required=True))
    yield lambda *argv: (lambda args: args.func(args))(parser.parse_args(list(argv)))
    get_settings.cache_clear()


def test_memories_added_on_the_command_line_are_listed_searched_and_deleted(run, capsys):
    assert run("memory", "add", "--user", "alice", "The", "user", "prefers", "answers", "in", "German.") == 0
    memory_id = capsys.readouterr().out.strip()
    assert run("memory", "add", "--user", "alice", "The user is allergic to peanuts.") == 0
    capsys.readouterr()
    assert run("memory", "list", "--user", "alice") == 0
    listed = capsys.readouterr().out.splitlines()
    assert len(listed) == 2 and listed[1].startswith(memory_id) and listed[1].endswith("The user prefers answers in German.")
    assert run("memory", "search", "--user", "alice", "--limit", "1", "Which language do I want?") == 0
    assert capsys.readouterr().out.strip().endswith("The user prefers answers in German.")
    assert run("memory", "list", "--user", "bob") == 0 and capsys.readouterr().out == ""
    assert run("memory", "delete", "--user", "alice", memory_id) == 0
    assert run("memory", "delete", "--user", "alice", memory_id) == 1
    assert "no memory" in capsys.readouterr().err
