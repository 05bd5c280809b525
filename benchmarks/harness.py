"""What the SSE benchmarks share: percentiles, a lean SSE frame reader, the scripted model's
settings for a Ragline server, waiting for a server to be healthy, and a process tree's memory.

Kept free of Ragline imports so that a benchmark's client process stays light.
"""

from __future__ import annotations

import codecs
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


# A client must drop an idle keep-alive connection before the server does (uvicorn: after 5 s, and
# httpx's default is also 5 s). Otherwise, under load, a request sent on a connection the server
# is closing at that moment fails with ReadError: a whole stream "lost" that the server never saw.
KEEPALIVE_S = 1.0


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of a non-empty list."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


class Frame:
    """One SSE frame: its id, event name ("message" when absent) and data lines joined."""

    __slots__ = ("id", "event", "data")

    def __init__(self, id_: str, event: str, data: str) -> None:
        self.id, self.event, self.data = id_, event, data


def parse_frame(block: str) -> Frame | None:
    """A frame from the text between two blank lines; None for comments and retry-only blocks."""
    id_, event, data = "", "message", []
    for line in block.split("\n"):
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            data.append(value)
        elif name == "id":
            id_ = value
        elif name == "event":
            event = value
    return Frame(id_, event, "\n".join(data)) if data else None


async def sse_frames(response: Any) -> AsyncIterator[Frame]:
    """Frames of a streamed aiohttp response. The clients read with aiohttp, not httpx: with
    hundreds of connections open, httpx's CPU per chunk grows with their number, and a client
    short of CPU adds its own lag to every latency it measures. Splits on blank lines itself
    (split_frames), which costs less per event than a line iterator."""
    decoder, buffer = codecs.getincrementaldecoder("utf-8")(), ""
    async for chunk in response.content.iter_any():
        frames, buffer = split_frames(buffer + decoder.decode(chunk))
        for frame in frames:
            yield frame


def split_frames(buffer: str) -> tuple[list[Frame], str]:
    """The whole frames in `buffer`, and the unfinished rest."""
    if "\r" in buffer:  # sse-starlette (LangGraph's API server) ends lines with CRLF
        buffer = buffer.replace("\r\n", "\n")
    *blocks, rest = buffer.split("\n\n")
    return [frame for block in blocks if (frame := parse_frame(block)) is not None], rest


def scripted_env(model_base_url: str) -> dict[str, str]:
    """Settings of a Ragline process whose chat model is a scripted OpenAI-compatible server."""
    return {
        "RAGLINE_CHAT_MODEL": "openai/scripted",
        "RAGLINE_CHAT_API_BASE": model_base_url,
        "RAGLINE_CHAT_API_KEY": "k",
        "RAGLINE_GENERATE_TITLES": "false",  # a title call would be a second model request per turn
        "RAGLINE_API_KEYS": "{}",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LANGSMITH_TRACING": "false",
    }


def wait_healthy(process: subprocess.Popen[bytes], url: str, timeout_s: float = 120) -> None:
    """Poll `url` until it answers 200; kill the process and raise if it exits or times out."""
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if process.poll() is not None:
            break
        time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"the server behind {url} did not start (exit code {process.poll()})")


_RSS = re.compile(r"^VmRSS:\s+(\d+) kB", re.MULTILINE)


def _tree(pid: int) -> list[int]:
    """A process and all its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    ppid = int(stat.read().rpartition(")")[2].split()[1])
            except OSError:
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def rss_mb(pid: int) -> float:
    """Resident memory of one process, in MB (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            match = _RSS.search(status.read())
    except OSError:
        return 0.0
    return int(match.group(1)) / 1024 if match else 0.0


def tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and all its descendants, in MB (0 when it is gone)."""
    return sum(rss_mb(member) for member in _tree(pid))


def tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) used so far by a process and its live descendants."""
    ticks = 0
    for member in _tree(pid):
        try:
            with open(f"/proc/{member}/stat") as stat:
                fields = stat.read().rpartition(")")[2].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))
    return ticks / os.sysconf("SC_CLK_TCK")
