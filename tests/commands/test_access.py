"""`ragline access`, run as an operator runs it (a subprocess, the real local embedder): a document
narrowed to a group, shown, explained for a user in it and one outside it, searched as each, and
opened again; a rule with no one in it is a one-line error."""

import os
import subprocess
import sys
from pathlib import Path

from tests.scripted_model import Reply


def ragline(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragline", *args], capture_output=True, text=True, timeout=300, env=os.environ)


def test_a_document_narrowed_to_a_group_is_explained_and_searched_as_each_user(fresh_data_dir, tmp_path: Path):
    (tmp_path / "salaries.md").write_text("Salary bands: engineers earn 50 to 90 thousand a year.\n")
    (tmp_path / "canteen.md").write_text("The canteen serves lunch from noon to two.\n")
    assert ragline("kb", "create", "handbook").returncode == 0
    assert ragline("ingest", "--kb", "handbook", str(tmp_path / "salaries.md"), str(tmp_path / "canteen.md")).returncode == 0

    narrowed = ragline("access", "set", "--kb", "handbook", "--document", "salaries", "--groups", "hr")
    assert narrowed.returncode == 0 and "readable by group hr" in narrowed.stdout, narrowed.stderr
    assert "salaries" in ragline("access", "show", "--kb", "handbook").stdout
    outside = ragline("access", "explain", "--kb", "handbook", "--document", "salaries", "--user", "bob", "--groups", "eng")
    assert outside.returncode == 1 and "bob (groups eng) may not read salaries" in outside.stdout and "restricted to group hr" in outside.stdout
    inside = ragline("access", "explain", "--kb", "handbook", "--document", "salaries", "--user", "alice", "--groups", "hr")
    assert inside.returncode == 0 and "document: group hr" in inside.stdout
    assert "Salary bands" not in ragline("search", "salary bands", "--kb", "handbook", "--user", "bob", "--groups", "eng").stdout
    assert "Salary bands" in ragline("search", "salary bands", "--kb", "handbook", "--user", "alice", "--groups", "hr").stdout

    assert ragline("access", "set", "--kb", "handbook", "--document", "salaries", "--open").returncode == 0
    assert "Salary bands" in ragline("search", "salary bands", "--kb", "handbook", "--user", "bob").stdout
    nobody = ragline("access", "set", "--kb", "handbook")
    assert nobody.returncode == 1 and nobody.stderr.strip().count("\n") == 0 and "say who may read" in nobody.stderr


def test_ragline_ask_reads_as_its_user_and_groups(fresh_data_dir, tmp_path: Path, scripted_model):
    scripted_model.on(lambda body: True, Reply.text("Here is what I found."))
    (tmp_path / "salaries.md").write_text("Salary bands: engineers earn 50 to 90 thousand a year.\n")
    assert ragline("kb", "create", "handbook").returncode == 0
    assert ragline("ingest", "--kb", "handbook", str(tmp_path / "salaries.md")).returncode == 0
    assert ragline("access", "set", "--kb", "handbook", "--document", "salaries", "--groups", "hr").returncode == 0
    asked = ragline("ask", "--kb", "handbook", "--user", "bob", "--groups", "eng", "What are the salary bands?")
    assert asked.returncode == 0, asked.stderr
    assert "90 thousand" not in str(scripted_model.requests)
    asked = ragline("ask", "--kb", "handbook", "--user", "alice", "--groups", "hr", "What are the salary bands?")
    assert asked.returncode == 0 and "90 thousand" in str(scripted_model.requests)
