"""The README's "Inside your own graph" code, run as written: a parent `MessagesState` graph with
LangGraph's plain `InMemorySaver`, `ragline_chat` as its node, two turns on one thread.

A real knowledge base (Chroma, bm25s, the local e5 embedder) in a fresh data directory; the
scripted model answers and cites the passage it was given.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import re
from pathlib import Path

import pytest

from ragline.services import Services
from tests.knowledge_base import create_knowledge_base
from tests.scripted_model import Reply

README = Path(__file__).resolve().parents[2] / "README.md"
MANUAL = (
    "To pair the sensor, hold its button until the light blinks blue, then choose Add sensor in the app. "
    "Pairing takes up to three minutes; keep the sensor within ten metres of the base station meanwhile."
)


def readme_embedding_code() -> str:
    section = README.read_text(encoding="utf-8").split("### Inside your own graph", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.fixture
def manuals(fresh_data_dir, scripted_model):
    """A fresh data directory holding the knowledge base the README names."""
    services = Services.from_settings()
    kb = create_knowledge_base(services, "manuals", {"Pairing": MANUAL})
    asyncio.run(services.aclose())
    return kb


def test_the_readme_embedding_keeps_the_conversation_and_streams_plain_chunks(manuals, scripted_model, caplog):
    scripted_model.on(lambda body: True, Reply(chunks=["Hold the button", " until it blinks", ' <ref id="c1"/>', "."]), times=1)
    scripted_model.on(lambda body: True, Reply(chunks=["Up to", " three minutes", ' <ref id="c1"/>', "."]))
    printed = io.StringIO()
    with caplog.at_level(logging.WARNING), contextlib.redirect_stdout(printed):
        exec(compile(readme_embedding_code(), "README.md", "exec"), {"__name__": "readme"})

    answers = [r for r in scripted_model.requests if "And how long" in str(r["messages"][-1]["content"])]
    assert answers, "the second question never reached the model"
    sent = " ".join(str(m["content"]) for m in answers[-1]["messages"])
    assert "How do I pair the sensor?" in sent and "Hold the button until it blinks" in sent  # turn 1 came along

    output = printed.getvalue()
    streamed, citations = output.split("\n", 1)
    assert streamed == "Up to three minutes." and "<" not in output.split("[", 1)[0]
    assert manuals.id in citations and "chunk_id" in citations
    assert not [r for r in caplog.records if "unregistered" in r.getMessage() or "blocked" in r.getMessage()]
