"""The load benchmark's chat model: the test suite's scripted OpenAI-compatible server, in a process
of its own, streaming answers whose every token carries its index and the wall-clock time it was
sent, at a fixed pace (20 tokens/s by default).

A token reads ` 00017@1767225600.123456;`. Whatever server relays the answer (Ragline, LangGraph's
API server), the client reads the stamps back from the answer text: latency is the time a token
reached the client minus the time the model sent it, and a missing index is a lost event. Both
clocks are this machine's `time.time()`.

    python benchmarks/stamped_model.py --tokens 40 --rate 20   # prints its base URL
"""

from __future__ import annotations

import argparse
import asyncio
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator

from harness import ROOT
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from tests.scripted_model import ScriptedModel, _chunk, _sse

STARTED_BY = "load.py"  # a helper process (benchmarks/load_servers.py starts it): run through load.py's --smoke
TOKEN = re.compile(r"(\d{5})@(\d+\.\d{6});")


def token(index: int) -> str:
    return f" {index:05d}@{time.time():.6f};"


class StampedModel(ScriptedModel):
    def __init__(self, tokens: int, rate: float) -> None:
        super().__init__()
        self.tokens, self.interval = tokens, 1 / rate

    async def _chat(self, request: Request) -> Response:
        body = await request.json()
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return StreamingResponse(self._tokens(usage), media_type="text/event-stream")

    async def _tokens(self, usage: bool) -> AsyncIterator[str]:
        """Tokens on an absolute schedule (start + k/rate): a late send does not delay the rest.
        Like OpenAI, a usage chunk last when asked for (else litellm counts the tokens itself,
        with tiktoken, which no real provider makes it do)."""
        start = time.monotonic()
        for index in range(self.tokens):
            await asyncio.sleep(max(0.0, start + index * self.interval - time.monotonic()))
            yield _sse(_chunk({"content": token(index)}, None))
        yield _sse(_chunk({}, "stop"))
        if usage:
            counts = {"prompt_tokens": 10, "completion_tokens": self.tokens, "total_tokens": 10 + self.tokens}
            yield _sse({**_chunk({}, None), "choices": [], "usage": counts})
        yield "data: [DONE]\n\n"


def start(tokens: int, rate: float) -> tuple[subprocess.Popen[str], str]:
    """The model in a subprocess (its sends must not share a GIL with the measuring client);
    returns the process and its OpenAI base URL."""
    process = subprocess.Popen(
        [sys.executable, __file__, "--tokens", str(tokens), "--rate", str(rate)], cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )
    assert process.stdout is not None
    base_url = process.stdout.readline().strip()  # the child prints its URL once it listens
    if not base_url.startswith("http"):
        process.kill()
        raise RuntimeError("the stamped model did not start")
    return process, base_url


def serve(tokens: int, rate: float) -> None:
    model = StampedModel(tokens, rate).start()
    print(model.base_url, flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=40)
    parser.add_argument("--rate", type=float, default=20.0)
    args = parser.parse_args()
    serve(args.tokens, args.rate)
