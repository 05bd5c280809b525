"""An HTTP/1.1 chat provider on loopback written on raw asyncio sockets, so a test decides every
byte: how frames are split across writes, a stream cut without its last chunk, a silence, a
malformed line, and whether the client closed its connection.

Each request takes the next `Script` (the last one repeats). A streamed body goes out with
chunked transfer encoding, one HTTP chunk per piece, exactly as a real server flushes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

Piece = bytes | float  # bytes: one write; a float: seconds of silence


@dataclass
class Script:
    pieces: list[Piece] = field(default_factory=list)
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "text/event-stream"
    cut: bool = False  # drop the connection after the pieces, without the chunked terminator


def sse(payload: dict[str, Any] | str) -> bytes:
    """One event as an OpenAI-compatible server writes it."""
    data = payload if isinstance(payload, str) else json.dumps(payload)
    return f"data: {data}\n\n".encode()


def delta(content: str = "", reasoning: str = "", finish: str | None = None) -> dict[str, Any]:
    said = {key: value for key, value in (("content", content), ("reasoning_content", reasoning)) if value}
    return {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": said, "finish_reason": finish}]}


def answer(*words: str, usage: dict[str, int] | None = None) -> Script:
    """A well-formed stream: one event per word, a finish, a usage chunk when given, [DONE]."""
    pieces: list[Piece] = [sse(delta(w)) for w in words] + [sse(delta(finish="stop"))]
    if usage is not None:
        pieces.append(sse({"id": "c", "object": "chat.completion.chunk", "choices": [], "usage": usage}))
    return Script([*pieces, sse("[DONE]")])


def error(status: int, message: str = "scripted failure", headers: dict[str, str] | None = None) -> Script:
    return Script([json.dumps({"error": {"message": message}}).encode()], status=status, headers=headers or {},
                  content_type="application/json")


class LoopbackProvider:
    def __init__(self, scripts: list[Script]) -> None:
        self.scripts = scripts
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.request_lines: list[str] = []  # "POST /v1/chat/completions HTTP/1.1", or an absolute URI through a proxy
        self.client_closed = asyncio.Event()  # a client hung up while a reply was still going out
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def _read_request(self, reader: asyncio.StreamReader) -> dict[str, Any] | None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        self.headers.append(headers)
        self.request_lines.append(lines[0])
        return json.loads(body) if body else None

    async def _write(self, writer: asyncio.StreamWriter, script: Script, close: bool = False) -> None:
        extra = "".join(f"{k}: {v}\r\n" for k, v in {**script.headers, **({"connection": "close"} if close else {})}.items())
        writer.write(f"HTTP/1.1 {script.status} X\r\ncontent-type: {script.content_type}\r\n{extra}"
                     "transfer-encoding: chunked\r\n\r\n".encode())
        for piece in script.pieces:
            if isinstance(piece, float):
                await writer.drain()
                await asyncio.sleep(piece)
                continue
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        if not script.cut:
            writer.write(b"0\r\n\r\n")
        await writer.drain()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    body = await self._read_request(reader)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return  # the client closed an idle keep-alive connection
                self.requests.append(body or {})
                script = self.scripts[min(len(self.requests), len(self.scripts)) - 1]
                if not any(isinstance(piece, float) for piece in script.pieces):
                    await self._write(writer, script)
                    if script.cut:
                        return
                    continue
                # a reply with a silence: watch for the client hanging up meanwhile (the reply says
                # `connection: close`, so no next request can be mistaken for a hang-up)
                sending = asyncio.create_task(self._write(writer, script, close=True))
                hangup = asyncio.create_task(reader.read(1))  # b"" once the client closes its end
                await asyncio.wait({sending, hangup}, return_when=asyncio.FIRST_COMPLETED)
                if hangup.done() and not sending.done():
                    self.client_closed.set()
                sending.cancel()
                hangup.cancel()
                return
        finally:
            writer.close()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[LoopbackProvider]:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        try:
            yield self
        finally:
            server.close()
