"""The floor of benchmarks/load.py: a relay with no pipeline, on the stack Ragline serves with.

It answers Ragline's two routes of a chat turn (POST /api/v1/sessions, then POST
/api/v1/sessions/{id}/chat) with nothing in between the model and the client: Starlette and
uvicorn as `ragline serve` runs them, the model's stream read with aiohttp as
models/openai_stream.py reads it, and each delta sent on as a Ragline answer frame. No graph, no
checkpoint, no stream log, no middleware. What it measures on a machine is the best latency and
CPU per token any Python server built on these parts could show there, with the same client and
model sharing the cores: the distance from Ragline's row to this one is what Ragline's own work
costs, and a goal below this row is out of reach on that machine.

    python benchmarks/floor_relay.py --port 8123 --model http://127.0.0.1:8124/v1
"""

from __future__ import annotations

import argparse
import json
import uuid
from collections.abc import AsyncIterator

import aiohttp
import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

STARTED_BY = "load.py"  # a helper process (benchmarks/load_servers.py starts it for --servers floor): run through load.py's --smoke


class Relay:
    def __init__(self, model_url: str) -> None:
        self.model_url = model_url
        self.client: aiohttp.ClientSession | None = None

    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def session(self, request: Request) -> Response:
        return JSONResponse({"id": str(uuid.uuid4())}, status_code=201)

    async def chat(self, request: Request) -> Response:
        query = (await request.json())["query"]
        return StreamingResponse(self.frames(request.path_params["session_id"], query), media_type="text/event-stream")

    async def frames(self, session_id: str, query: str) -> AsyncIterator[str]:
        if self.client is None:
            self.client = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        message_id, index = str(uuid.uuid4()), 0
        body = {"model": "scripted", "messages": [{"role": "user", "content": query}], "stream": True}
        async with self.client.post(f"{self.model_url}/chat/completions", json=body) as response:
            buffer = b""
            async for chunk in response.content.iter_any():
                *lines, buffer = (buffer + chunk).split(b"\n\n")
                for line in lines:
                    data = line.removeprefix(b"data: ")
                    if data == b"[DONE]":
                        continue
                    choices = orjson.loads(data).get("choices") or [{}]
                    text = (choices[0].get("delta") or {}).get("content")
                    if text:
                        index += 1
                        yield frame(message_id, index, {"response_type": "answer", "content": text, "done": False,
                                                        "session_id": session_id, "assistant_message_id": message_id})
        yield frame(message_id, index + 1, {"response_type": "complete", "done": True, "session_id": session_id,
                                            "assistant_message_id": message_id})


def frame(message_id: str, index: int, event: dict[str, object]) -> str:
    return f"id: {message_id}:{index}\nevent: message\ndata: {json.dumps(event, ensure_ascii=False, separators=(',', ':'))}\n\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", required=True, help="the OpenAI-compatible base URL of the chat model")
    args = parser.parse_args()
    relay = Relay(args.model)
    app = Starlette(routes=[
        Route("/health", relay.health),
        Route("/api/v1/sessions", relay.session, methods=["POST"]),
        Route("/api/v1/sessions/{session_id}/chat", relay.chat, methods=["POST"]),
    ])
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")  # the loop and parser `ragline serve` gets


if __name__ == "__main__":
    main()
