"""Servers for the API tests: the app in a thread (in-process) or `ragline serve` in a subprocess,
and a small SSE client that reads frames the way EventSource does."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from tests.redis_server import free_port

ROOT = Path(__file__).resolve().parents[2]


def memory_settings(scripted: Any = None, **overrides: Any) -> Any:
    """Settings of an in-process service: everything in memory, a heartbeat every second, no
    per-key rate limit (a module of tests sends far more than 10 requests a second; the limit has
    its own tests in test_key_limits.py), and the scripted model (a ScriptedModel server) as the
    chat model when given."""
    from ragline.settings import Settings

    if scripted is not None:
        overrides = {"chat_model": "openai/scripted", "chat_api_base": scripted.base_url, "chat_api_key": "scripted-key", **overrides}
    return Settings(**{"checkpointer": "memory", "stream_manager": "memory", "redis_url": None, "sse_heartbeat_s": 1.0,
                       "rate_limit_per_minute": 0, **overrides})


def embedded_services(root: Path, settings: Any, embedder: Any = None) -> Any:
    """Services whose retrieval stack lives under `root`: Chroma files, and the local e5 embedder
    (its cache under `root` too, unless an embedder is given)."""
    from ragline.models.embeddings import Embedder, EmbeddingCache
    from ragline.retrieval.config import RetrievalConfig
    from ragline.retrieval.stack import RetrievalStack
    from ragline.services import Services

    embedder = embedder or Embedder(model="ragline/multilingual-e5-small", cache=EmbeddingCache(root / "embeddings.sqlite"))

    def stack() -> RetrievalStack:
        return RetrievalStack.build(root / "retrieval", embedder, RetrievalConfig(redis_url=None, chroma_url=None))

    return Services(settings, retrieval_factory=stack)


def serve_embedded(root: Path, settings: Any, port: int | None = None) -> ThreadServer:
    """A started service over `embedded_services(root, settings)` (on `port`, or a free one); the caller stops it."""
    from ragline.api.app import create_app

    return ThreadServer(create_app(settings, services=embedded_services(root, settings)), port).start()


class ThreadServer:
    """An ASGI app under uvicorn in a background thread, on a free loopback port."""

    def __init__(self, app: Any, port: int | None = None) -> None:
        self.port = port or free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on", timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ThreadServer:
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the app did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)


class ProcessServer:
    """`python -m ragline serve` in a subprocess: a replica that can be killed for real."""

    def __init__(self, env: dict[str, str], port: int | None = None, log: Path | None = None, args: tuple[str, ...] = (),
                 log_level: str = "warning") -> None:
        self.port = port or free_port()
        self.log_level = log_level
        self.env = {**os.environ, **env}
        self.log = log
        self.args = args  # extra `ragline serve` arguments, e.g. ("--sample",)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> ProcessServer:
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL  # noqa: SIM115 (kept open for the child's life)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ragline", "serve", *self.args, "--port", str(self.port), "--log-level", self.log_level],
            cwd=ROOT, env=self.env, stdout=out, stderr=out,
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if self.process.poll() is not None:
                raise RuntimeError(f"ragline serve exited with {self.process.returncode} (log: {self.log})")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("ragline serve did not become healthy")
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, leases are not released."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


@dataclass
class Frame:
    id: str
    event: dict[str, Any]

    @property
    def type(self) -> str:
        return self.event["response_type"]

    @property
    def entry(self) -> str:
        return self.id.rpartition(":")[2]


async def frames(response: httpx.Response) -> AsyncIterator[Frame]:
    """SSE frames of a streamed response (comments and retry lines skipped)."""
    event_id, data = "", []
    async for line in response.aiter_lines():
        if line == "":
            if data:
                yield Frame(event_id, json.loads("\n".join(data)))
            event_id, data = "", []
        elif line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())


async def collect(client: httpx.AsyncClient, method: str, url: str, *, limit: int | None = None, **kwargs: Any) -> list[Frame]:
    """Frames of one SSE request; with `limit`, the client drops the connection after that many."""
    got: list[Frame] = []
    async with client.stream(method, url, **kwargs) as response:
        assert response.status_code == 200, (await response.aread()).decode()
        async for frame in frames(response):
            got.append(frame)
            if limit is not None and len(got) >= limit:
                break
    return got


def answer_of(frames_: list[Frame]) -> str:
    """The answer text a client shows: deltas appended, a `replace` event replacing."""
    text = ""
    for frame in frames_:
        if frame.type == "answer" and frame.event.get("content"):
            replace = (frame.event.get("data") or {}).get("replace")
            text = frame.event["content"] if replace else text + frame.event["content"]
    return text


def types(frames_: list[Frame]) -> list[str]:
    return [frame.type for frame in frames_]


async def new_session(client: httpx.AsyncClient, **body: Any) -> str:
    response = await client.post("/api/v1/sessions", json=body)
    assert response.status_code == 201, response.text
    return response.json()["id"]
