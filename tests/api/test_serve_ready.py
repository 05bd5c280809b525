"""`ragline serve --sample` on the local model: ready means ready (issue 31).

The port opens only after the one-time work (model assembly and load, the embedder, the answer
prompt's fixed-prefix cache), so /health cannot say ok while the model still loads, and the first
answer is not the one that pays for loading. A real server in a subprocess, the real local model.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.local_model

QUESTIONS = ("How often does the sensor send readings to the console?", "What is the radio range through walls?")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _health(base: str) -> int | None:
    try:
        with urllib.request.urlopen(f"{base}/health", timeout=2) as response:
            return response.status
    except OSError:
        return None


def _first_token_s(base: str, question: str) -> tuple[float, str]:
    body = json.dumps({"model": "ragline/kb/sample", "stream": True, "messages": [{"role": "user", "content": question}]})
    request = urllib.request.Request(f"{base}/v1/chat/completions", data=body.encode(), headers={"content-type": "application/json"})
    started, first, text = time.perf_counter(), None, ""
    with urllib.request.urlopen(request, timeout=300) as response:
        for raw in response:
            line = raw.decode("utf-8").strip()
            if line.startswith("data:") and line != "data: [DONE]":
                delta = json.loads(line[5:])["choices"][0].get("delta", {}).get("content") or ""
                if delta and first is None:
                    first = time.perf_counter() - started
                text += delta
    assert first is not None, f"no answer token for {question!r}"
    return first, text


def test_health_is_not_ok_before_the_local_model_is_loaded_and_the_first_answer_is_not_the_slow_one(tmp_path: Path):
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGLINE_CHAT", "OPENAI"))}
    log = tmp_path / "serve.log"
    with log.open("w") as sink:
        server = subprocess.Popen([sys.executable, "-m", "ragline", "serve", "--sample", "--port", str(port), "--log-level", "warning"],
                                  stdout=sink, stderr=subprocess.STDOUT, env=env)
    try:
        probes_while_loading: list[int | None] = []
        deadline = time.monotonic() + 600
        while (status := _health(base)) != 200:
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            if "loading the local model" in log.read_text() and "local model ready" not in log.read_text():
                probes_while_loading.append(status)
            time.sleep(0.2)
        assert "local model ready" in log.read_text(), "/health said ok before the local model was loaded"
        assert probes_while_loading and all(status != 200 for status in probes_while_loading)
        # the first question, another, then the first again: its prompt is prefilled the same way both
        # times (after a different question), so only first-use costs could tell the two apart
        (first, first_text), (_, other_text), (again, _) = (_first_token_s(base, q) for q in (*QUESTIONS, QUESTIONS[0]))
        assert "16 seconds" in first_text and "30" in other_text
        # the first answer after ready is an ordinary one: not several times the same answer later (model loading was ~10 s)
        assert first <= 1.5 * again + 1.0, (first, again)
    finally:
        server.terminate()
        server.wait(timeout=60)
