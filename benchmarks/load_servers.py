"""The servers of benchmarks/load.py (Ragline and `langgraph dev`, each a process running
Ragline's graph, and the floor: a relay with no pipeline) and what one client saw of one answer
(StreamResult)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import stamped_model
from harness import ROOT, scripted_env, sse_frames, wait_healthy

from tests.redis_server import free_port

QUERY = {"query": "go", "rewrite_enabled": False}  # one model call per turn: the answer


@dataclass
class StreamResult:
    """What one client saw of one answer."""

    latencies_ms: dict[int, float] = field(default_factory=dict)
    sent: dict[int, float] = field(default_factory=dict)  # token index -> when the model sent it
    asked_at: float = 0.0  # when the client began the turn (its first request)
    first_at: float | None = None  # when the first token reached the client
    last_at: float | None = None
    duplicates: int = 0
    error: str | None = None
    failed_at: float = 0.0
    text: str = ""

    def feed(self, content: str, arrived: float) -> None:
        """Answer text as it arrives; a token counts once its `;` is in (it may come in pieces)."""
        self.text += content
        self.first_at = self.first_at or arrived
        self.last_at = arrived
        end = self.text.rfind(";")
        if end < 0:
            return
        for match in stamped_model.TOKEN.finditer(self.text, 0, end + 1):
            index = int(match.group(1))
            if index in self.latencies_ms:
                self.duplicates += 1
            else:
                self.sent[index] = float(match.group(2))
                self.latencies_ms[index] = (arrived - self.sent[index]) * 1000
        self.text = self.text[end + 1 :]

    def model_rate(self) -> float | None:
        """Tokens per second the model actually sent on this stream (below --rate when it was short of CPU)."""
        if len(self.sent) < 2:
            return None
        span = max(self.sent.values()) - min(self.sent.values())
        return (len(self.sent) - 1) / span if span > 0 else None

    def fail(self, error: str) -> None:
        if self.error is None:
            self.error, self.failed_at = error[:200], time.monotonic()


# --- the two servers ---


class Server:
    """A server process under test and how a client asks it one question."""

    name = ""

    def __init__(self, model_url: str, n: int, redis_url: str | None, reader: str = "direct") -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, **scripted_env(model_url), "RAGLINE_CHECKPOINTER": "memory", "RAGLINE_STREAM_MANAGER": "memory",
                    "RAGLINE_CHAT_DIRECT": str(reader == "direct").lower()}
        if redis_url:
            self.env.update({"RAGLINE_REDIS_URL": redis_url, "RAGLINE_CHECKPOINTER": "redis", "RAGLINE_STREAM_MANAGER": "redis"})
        self.n = n
        self.process: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def health_path(self) -> str:
        raise NotImplementedError

    async def ask(self, client: Any, result: StreamResult) -> None:
        raise NotImplementedError

    def start(self) -> Server:
        self.process = subprocess.Popen(self.command(), cwd=ROOT, env=self.env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True)
        wait_healthy(self.process, self.url + self.health_path(), timeout_s=180)
        return self

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)  # langgraph dev runs its server in child processes
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


class RaglineServer(Server):
    name = "ragline"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "ragline", "serve", "--port", str(self.port), "--log-level", "warning"]

    def health_path(self) -> str:
        return "/health"

    async def ask(self, client: Any, result: StreamResult) -> None:
        async with client.post(f"{self.url}/api/v1/sessions", json={"title": "load"}) as created:
            if created.status != 201:
                return result.fail(f"session: HTTP {created.status}")
            session_id = (await created.json())["id"]
        async with client.post(f"{self.url}/api/v1/sessions/{session_id}/chat", json=QUERY) as response:
            if response.status != 200:
                return result.fail(f"chat: HTTP {response.status}")
            async for frame in sse_frames(response):
                event = json.loads(frame.data)
                kind = event.get("response_type")
                if kind == "answer" and event.get("content"):
                    result.feed(event["content"], time.time())
                elif kind == "error":
                    result.fail(f"error event: {event.get('content', '')}")


class FloorRelay(RaglineServer):
    """benchmarks/floor_relay.py: Ragline's routes with nothing between the model and the client."""

    name = "floor (bare relay)"

    def command(self) -> list[str]:
        return [sys.executable, str(ROOT / "benchmarks" / "floor_relay.py"), "--port", str(self.port), "--model", self.env["RAGLINE_CHAT_API_BASE"]]


class LangGraphServer(Server):
    name = "langgraph dev"

    def command(self) -> list[str]:
        binary = shutil.which("langgraph", path=str(ROOT / ".venv" / "bin")) or "langgraph"
        return [binary, "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1",
                "--port", str(self.port), "--n-jobs-per-worker", str(max(self.n, 10))]

    def start(self) -> Server:
        self.env.update({"LANGGRAPH_NO_VERSION_CHECK": "true", "LANGSMITH_TRACING": "false"})
        return super().start()

    def health_path(self) -> str:
        return "/ok"

    async def ask(self, client: Any, result: StreamResult) -> None:
        async with client.post(f"{self.url}/threads", json={}) as created:
            if created.status != 200:
                return result.fail(f"thread: HTTP {created.status}")
            thread_id = (await created.json())["thread_id"]
        body = {"assistant_id": "ragline", "input": {"request": QUERY}, "stream_mode": ["custom"]}
        async with client.post(f"{self.url}/threads/{thread_id}/runs/stream", json=body) as response:
            if response.status != 200:
                return result.fail(f"runs/stream: HTTP {response.status}")
            async for frame in sse_frames(response):
                if frame.event == "custom":
                    event = json.loads(frame.data)
                    if event.get("response_type") == "answer" and event.get("content"):
                        result.feed(event["content"], time.time())
                elif frame.event == "error":
                    result.fail(f"error event: {frame.data}")


SERVERS: dict[str, type[Server]] = {"ragline": RaglineServer, "langgraph": LangGraphServer, "floor": FloorRelay}
