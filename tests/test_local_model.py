"""End to end with the real local model: no network, no API key."""

import os
import subprocess
import sys

import pytest

from ragline.graph.events import ResponseType
from ragline.graph.request import PipelineRequest
from ragline.settings import LOCAL_CHAT_MODEL
from tests.nodes.helpers import answer_text, node_runtime, of_type, run_turn

pytestmark = pytest.mark.local_model

OFFLINE = {"no_proxy": "", "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}  # any network use fails fast


def _local_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGLINE_CHAT", "OPENAI"))}
    return {**env, **OFFLINE}


def test_ragline_ask_names_paris_with_the_local_model():
    result = subprocess.run(
        [sys.executable, "-m", "ragline", "ask", "What is the capital of France?"],
        capture_output=True, text=True, env=_local_env(), timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "Paris" in result.stdout


async def test_local_model_streams_a_chinese_answer(monkeypatch):
    monkeypatch.delenv("RAGLINE_CHAT_MODEL", raising=False)
    events = await run_turn("chat_stream", PipelineRequest(query="法国的首都是哪里？", summary={"max_tokens": 40, "temperature": 0}))
    assert "巴黎" in answer_text(events)
    assert len(of_type(events, ResponseType.ANSWER)) > 2  # streamed in pieces, not at once


async def test_local_model_follows_the_rewrite_json_instruction():
    from ragline.graph.state import HistoryTurn, TurnIds
    from ragline.nodes.query_understand import query_understand

    state = {
        "request": PipelineRequest(query="How many people live there?", chat_model=LOCAL_CHAT_MODEL),
        "turn": TurnIds("s", "r", "u", "a"),
        "history": [HistoryTurn("r0", "Tell me about Paris.", "Paris is the capital of France.")],
    }
    update = await query_understand(state, node_runtime())
    assert "Paris" in update["rewrite_query"]


def test_ragline_ask_answers_from_the_sample_knowledge_base_with_the_local_model():
    result = subprocess.run(
        [sys.executable, "-m", "ragline", "ask", "--sample", "How long does pairing the sensor take?"],
        capture_output=True, text=True, env=_local_env(), timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert "three minutes" in result.stdout.lower() or "3 minutes" in result.stdout.lower()
