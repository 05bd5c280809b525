"""A scripted OpenAI-compatible chat server on loopback: the stand-in for remote providers.

Tests reach it through litellm exactly as they would reach OpenAI (model "openai/scripted",
api_base = server.base_url), so the real client code path is exercised: streaming chunks,
reasoning_content deltas, finish reasons, HTTP errors.

It also serves embeddings (OpenAI's /v1/embeddings: "openai/scripted-embed", api_base =
base_url) and rerank (Cohere's /v1/rerank: "cohere/scripted-rerank", api_base = root_url: /v2/rerank), each
with its own rules (`on_embedding`, `on_rerank`) so that chat rules never answer them.

`python -m tests.scripted_model --port N --reply TEXT` runs it on its own, answering every chat with
TEXT, for a process outside the suite (scripts/check-wheel.sh serves an installed wheel against it).
"""

from __future__ import annotations

import argparse
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
class ScriptedCall:
    """A tool call a reply makes: `arguments` a dict (sent as JSON) or raw text (malformed on purpose)."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str = ""

    def raw(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass
class Reply:
    chunks: list[str] = field(default_factory=list)  # answer content, one SSE chunk each
    reasoning: list[str] = field(default_factory=list)  # reasoning_content deltas, sent first
    finish_reason: str = "stop"
    double_finish: bool = False  # some vendors signal the end twice
    status: int = 200
    error: str = "scripted failure"
    chunk_delay: float = 0.0
    first_delay: float = 0.0  # seconds before the first chunk of a streamed reply (a model slow to start)
    delay: float = 0.0  # seconds before a non-streamed reply (a slow model)
    raw: str | None = None  # a 200 whose body is this text instead of JSON (a malformed reply)
    cut_after: int | None = None  # the stream stops after this many chunks, without a finish or [DONE]
    headers: dict[str, str] = field(default_factory=dict)  # sent with an error status (Retry-After)
    scores: list[float] | None = None  # rerank: one score per document (default: word overlap with the query)
    rank: Callable[[str, Any], float] | None = None  # rerank: the score of (query, document as sent: text or {"image": ...})
    vectors: Callable[[str], list[float]] | None = None  # embeddings: the vector of each input (default: word_vector)
    tool_calls: list[ScriptedCall] = field(default_factory=list)  # chat: calls after the text (finish_reason "tool_calls")

    @classmethod
    def text(cls, text: str, **kwargs: Any) -> Reply:
        words = text.split(" ")
        return cls(chunks=[w if i == 0 else " " + w for i, w in enumerate(words)], **kwargs)

    @classmethod
    def calling(cls, *calls: ScriptedCall, text: str = "", **kwargs: Any) -> Reply:
        """A reply that says `text` (if any) and then calls the tools."""
        chunks = cls.text(text).chunks if text else []
        return cls(chunks=chunks, tool_calls=list(calls), **kwargs)

    def ending(self) -> str:
        """The finish reason sent: "tool_calls" for a reply that calls tools, unless another one was scripted."""
        return "tool_calls" if self.tool_calls and self.finish_reason == "stop" else self.finish_reason

    def wire_calls(self) -> list[dict[str, Any]]:
        return [{"id": call.id or f"call_{i}", "type": "function", "function": {"name": call.name, "arguments": call.raw()}}
                for i, call in enumerate(self.tool_calls)]

    def call_deltas(self) -> list[dict[str, Any]]:
        """The calls as streamed `tool_calls` deltas: id and name first, then the arguments in two pieces."""
        deltas: list[dict[str, Any]] = []
        for i, call in enumerate(self.wire_calls()):
            raw = call["function"]["arguments"]
            half = len(raw) // 2
            deltas.append({"tool_calls": [{"index": i, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"], "arguments": ""}}]})
            deltas += [{"tool_calls": [{"index": i, "function": {"arguments": piece}}]} for piece in (raw[:half], raw[half:]) if piece]
        return deltas


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
        self.embedding_rules: list[tuple[Predicate, Reply, int | None]] = []
        self.embedding_requests: list[dict[str, Any]] = []
        self.rerank_rules: list[tuple[Predicate, Reply, int | None]] = []
        self.rerank_requests: list[dict[str, Any]] = []
        self.port = _free_port()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def root_url(self) -> str:
        """Base URL without /v1 (Cohere-style clients add /v1/rerank themselves)."""
        return f"http://127.0.0.1:{self.port}"

    def on(self, predicate: Predicate, reply: Reply, times: int | None = None) -> None:
        """Answer requests matching predicate with reply (first matching rule wins)."""
        self.rules.append((predicate, reply, times))

    def on_embedding(self, reply: Reply, times: int | None = None, when: Predicate | None = None) -> None:
        """Answer embedding requests (those `when` holds for) with reply (status, headers, delay, raw and vectors apply)."""
        self.embedding_rules.append((when or (lambda _b: True), reply, times))

    def on_rerank(self, reply: Reply, times: int | None = None) -> None:
        """Answer rerank requests with reply (status, headers, delay, raw and scores apply)."""
        self.rerank_rules.append((lambda _b: True, reply, times))

    def reset(self) -> None:
        """Forget every rule and request (a fresh server for the next test)."""
        for log in (self.rules, self.requests, self.embedding_rules, self.embedding_requests, self.rerank_rules, self.rerank_requests):
            log.clear()

    def _reply_for(self, body: dict[str, Any], rules: list[tuple[Predicate, Reply, int | None]] | None = None) -> Reply | None:
        rules = self.rules if rules is None else rules
        for index, (predicate, reply, times) in enumerate(rules):
            if predicate(body):
                if times is not None:
                    rules[index] = (predicate, reply, times - 1) if times > 1 else (lambda _b: False, reply, 0)
                return reply
        return self.default if rules is self.rules else None

    @staticmethod
    def _fault(reply: Reply) -> Response | None:
        """The scripted failure of a reply (an error status or a malformed body), if it has one."""
        if reply.status != 200:
            return JSONResponse({"error": {"message": reply.error, "type": "scripted"}}, status_code=reply.status, headers=reply.headers)
        if reply.raw is not None:
            return Response(reply.raw, media_type="application/json")
        return None

    async def _chat(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        reply = self._reply_for(body)
        assert reply is not None
        if (fault := self._fault(reply)) is not None:
            return fault
        if not body.get("stream"):
            if reply.delay:
                await asyncio.sleep(reply.delay)
            message: dict[str, Any] = {"role": "assistant", "content": "".join(reply.chunks)}
            if reply.reasoning:
                message["reasoning_content"] = "".join(reply.reasoning)
            if reply.tool_calls:
                message["tool_calls"] = reply.wire_calls()
            return JSONResponse(_completion(message, reply.ending()))
        return StreamingResponse(self._stream(reply), media_type="text/event-stream")

    async def _stream(self, reply: Reply):
        deltas = [{"reasoning_content": r} for r in reply.reasoning] + [{"content": c} for c in reply.chunks] + reply.call_deltas()
        if reply.first_delay:
            await asyncio.sleep(reply.first_delay)
        for sent, delta in enumerate(deltas):
            if reply.cut_after is not None and sent >= reply.cut_after:
                raise ConnectionResetError("scripted: the stream is cut")  # the server drops the connection
            yield _sse(_chunk(delta, None))
            if reply.chunk_delay:
                await asyncio.sleep(reply.chunk_delay)
        yield _sse(_chunk({}, reply.ending()))
        if reply.double_finish:
            yield _sse(_chunk({}, reply.ending()))
        yield "data: [DONE]\n\n"

    async def _embeddings(self, request: Request) -> Response:
        body = await request.json()
        self.embedding_requests.append(body)
        reply = self._reply_for(body, self.embedding_rules) or Reply()
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if (fault := self._fault(reply)) is not None:
            return fault
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        embed = reply.vectors or _vector
        data = [{"object": "embedding", "index": i, "embedding": embed(str(text))} for i, text in enumerate(texts)]
        return JSONResponse({"object": "list", "data": data, "model": "scripted-embed", "usage": {"prompt_tokens": 1, "total_tokens": 1}})

    async def _rerank(self, request: Request) -> Response:
        body = await request.json()
        self.rerank_requests.append(body)
        reply = self._reply_for(body, self.rerank_rules) or Reply()
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if (fault := self._fault(reply)) is not None:
            return fault
        documents = [d if isinstance(d, str) else d.get("text", "") for d in body["documents"]]
        scores = reply.scores or [reply.rank(body["query"], d) if reply.rank else _overlap(body["query"], t)
                                  for d, t in zip(body["documents"], documents)]
        results = sorted(({"index": i, "relevance_score": s} for i, s in enumerate(scores)), key=lambda r: -r["relevance_score"])
        return JSONResponse({"id": "rerank-scripted", "results": results, "meta": {"billed_units": {"search_units": 1}}})

    def start(self) -> ScriptedModel:
        app = Starlette(routes=[
            Route("/v1/chat/completions", self._chat, methods=["POST"]),
            Route("/v1/embeddings", self._embeddings, methods=["POST"]),
            Route("/v1/rerank", self._rerank, methods=["POST"]),
            Route("/v2/rerank", self._rerank, methods=["POST"]),  # litellm's cohere/ models speak v2
        ])
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


def word_vector(text: str, dims: int = 8) -> list[float]:
    """A deterministic unit vector of the text's words (equal texts, equal vectors)."""
    values = [0.0] * dims
    for word in text.lower().split():
        values[sum(map(ord, word)) % dims] += 1.0
    norm = sum(v * v for v in values) ** 0.5 or 1.0
    return [v / norm for v in values]


_vector = word_vector  # the default of every embedding reply


def _overlap(query: str, document: str) -> float:
    """Share of the query's words found in the document: a stand-in relevance score."""
    words = set(query.lower().split())
    return len(words & set(document.lower().split())) / len(words) if words else 0.0


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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.scripted_model", description="The scripted OpenAI-compatible server, on its own.")
    parser.add_argument("--port", type=int, help="port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--reply", default="scripted answer", help="the answer to every chat request")
    args = parser.parse_args(argv)
    model = ScriptedModel()
    model.port = args.port or model.port
    model.default = Reply.text(args.reply)
    model.start()
    print(f"scripted model on {model.base_url}", flush=True)
    try:
        threading.Event().wait()  # serves from its thread until the process is stopped
    except KeyboardInterrupt:
        pass
    finally:
        model.stop()


if __name__ == "__main__":
    main()
