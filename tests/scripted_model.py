"""A scripted OpenAI-compatible chat server on loopback: the stand-in for remote providers.

Tests reach it through litellm exactly as they would reach OpenAI (model "openai/scripted",
api_base = server.base_url), so the real client code path is exercised: streaming chunks,
reasoning_content deltas, finish reasons, HTTP errors.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

Predicate = Callable[[dict[str, Any]], bool]


@dataclass
class Reply:
    chunks: list[str] = field(default_factory=list)  # answer content, one SSE chunk each
    reasoning: list[str] = field(default_factory=list)  # reasoning_content deltas, sent first
    finish_reason: str = "stop"
    double_finish: bool = False  # some vendors signal the end twice
    status: int = 200
    error: str = "scripted failure"
    chunk_delay: float = 0.0
    delay: float = 0.0  # seconds before a non-streamed reply (a slow model)
    raw: str | None = None  # a 200 whose body is this text instead of JSON (a malformed reply)
    cut_after: int | None = None  # the stream stops after this many chunks, without a finish or [DONE]

    @classmethod
    def text(cls, text: str, **kwargs: Any) -> Reply:
        words = text.split(" ")
        return cls(chunks=[w if i == 0 else " " + w for i, w in enumerate(words)], **kwargs)


def last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


def system_text(body: dict[str, Any]) -> str:
    return "\n".join(m.get("content", "") for m in body.get("messages", []) if m.get("role") == "system" and isinstance(m.get("content"), str))


class ScriptedModel:
    def __init__(self) -> None:
        self.rules: list[tuple[Predicate, Reply, int | None]] = []
        self.default = Reply.text("scripted answer")
        self.requests: list[dict[str, Any]] = []
        self.port = _free_port()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def on(self, predicate: Predicate, reply: Reply, times: int | None = None) -> None:
        """Answer requests matching predicate with reply (first matching rule wins)."""
        self.rules.append((predicate, reply, times))

    def _reply_for(self, body: dict[str, Any]) -> Reply:
        for index, (predicate, reply, times) in enumerate(self.rules):
            if predicate(body):
                if times is not None:
                    self.rules[index] = (predicate, reply, times - 1) if times > 1 else (lambda _b: False, reply, 0)
                return reply
        return self.default

    async def _chat(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        reply = self._reply_for(body)
        if reply.status != 200:
            return JSONResponse({"error": {"message": reply.error, "type": "scripted"}}, status_code=reply.status)
        if reply.raw is not None:
            return Response(reply.raw, media_type="application/json")
        if not body.get("stream"):
            if reply.delay:
                await asyncio.sleep(reply.delay)
            message: dict[str, Any] = {"role": "assistant", "content": "".join(reply.chunks)}
            if reply.reasoning:
                message["reasoning_content"] = "".join(reply.reasoning)
            return JSONResponse(_completion(message, reply.finish_reason))
        return StreamingResponse(self._stream(reply), media_type="text/event-stream")

    async def _stream(self, reply: Reply):
        deltas = [{"reasoning_content": r} for r in reply.reasoning] + [{"content": c} for c in reply.chunks]
        for sent, delta in enumerate(deltas):
            if reply.cut_after is not None and sent >= reply.cut_after:
                raise ConnectionResetError("scripted: the stream is cut")  # the server drops the connection
            yield _sse(_chunk(delta, None))
            if reply.chunk_delay:
                await asyncio.sleep(reply.chunk_delay)
        yield _sse(_chunk({}, reply.finish_reason))
        if reply.double_finish:
            yield _sse(_chunk({}, reply.finish_reason))
        yield "data: [DONE]\n\n"

    def start(self) -> ScriptedModel:
        app = Starlette(routes=[Route("/v1/chat/completions", self._chat, methods=["POST"])])
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("scripted model server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._server:
            self._server.should_exit = True
        if self._thread:
            self._thread.join(timeout=5)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _chunk(delta: dict[str, Any], finish_reason: str | None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": "scripted",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def _completion(message: dict[str, Any], finish_reason: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def _sse(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload)}\n\n"
