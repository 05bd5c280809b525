"""What the benchmarks share: the `--smoke` option and its tiny data sets, percentiles, a lean SSE
frame reader, the scripted model's settings for a Ragline server, waiting for a server to be
healthy, and a process tree's memory.

Kept free of Ragline imports so that a benchmark's client process stays light.
"""

from __future__ import annotations

import argparse
import atexit
import codecs
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


EVAL = ROOT.parent / "shared" / "data" / "eval"  # the shared evaluation sets, beside the clone
SMOKE_EVAL = Path(__file__).with_name("data") / "smoke_eval"  # five questions on the sample manual, in the same layout

SMOKE_HELP = ("a tiny run (a few questions, streams or documents; seconds, not minutes) through the same code path, "
              "still printing its table: tests/test_benchmarks.py runs every benchmark so")


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None = None, **smoke: Any) -> argparse.Namespace:
    """The parser's arguments plus `--smoke`, with which `smoke`'s values become the defaults (an option
    given on the command line still wins). Every script under benchmarks/ takes `--smoke`."""
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args(argv)
    if args.smoke:
        parser.set_defaults(**smoke)
        args = parser.parse_args(argv)
    return args


def smoke_clean(args: argparse.Namespace, problems: list[str]) -> None:
    """After the table: at `--smoke` size, what must never happen (a broken or lost stream, a failed
    turn) ends the script with exit code 1; at full size such counts are figures the table reports."""
    if getattr(args, "smoke", False) and problems:
        for problem in problems[:10]:
            print(f"smoke: {problem}", file=sys.stderr)
        sys.exit(1)


def scratch_dir(prefix: str) -> Path:
    """A temporary folder removed when the process exits."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def use_data_dir(path: Path) -> None:
    """Ragline's data directory for this process and the ones it starts (RAGLINE_DATA_DIR). The local
    models stay where they were (RAGLINE_LOCAL_MODELS_DIR): a fresh data directory does not assemble
    its own copy of the 1.1 GB chat model."""
    # ragline/settings.py's default data directory, written out: this module imports nothing of Ragline
    before = os.environ.get("RAGLINE_DATA_DIR") or str(Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "ragline")
    os.environ.setdefault("RAGLINE_LOCAL_MODELS_DIR", str(Path(before) / "models"))
    os.environ["RAGLINE_DATA_DIR"] = str(path)


def _jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def smoke_set(data: Path, questions: int = 3, others: int = 6, golds: int = 2) -> Path:
    """For `--smoke`: the first `questions` judged questions of the evaluation set `data` (BEIR layout:
    corpus.jsonl, queries.jsonl, qrels.tsv, and answers.jsonl when it has one), at most `golds` gold
    documents of each and `others` more, copied to a temporary folder named `<set>-smoke`. When `data` is not on this
    machine, the bundled set of five sample-manual questions (benchmarks/data/smoke_eval) stands in:
    the code path is the same, only the figures mean nothing."""
    if not (data / "qrels.tsv").is_file():
        print(f"{data} is not here: the smoke run uses {SMOKE_EVAL}", file=sys.stderr)
        data = SMOKE_EVAL
    with (data / "qrels.tsv").open(encoding="utf-8") as fh:
        rows = [line.rstrip("\n").split("\t") for line in fh][1:]
    answers = {row["_id"]: row for row in _jsonl(data / "answers.jsonl")} if (data / "answers.jsonl").is_file() else None
    judged = {row[0] for row in rows}
    chosen = [q for q in _jsonl(data / "queries.jsonl") if q["_id"] in judged and (answers is None or q["_id"] in answers)][:questions]
    ids = {q["_id"] for q in chosen}
    qrels = [row for row in rows if row[0] in ids]
    qrels = [row for row in qrels if [r[0] for r in qrels[: qrels.index(row)]].count(row[0]) < golds]
    gold = {row[1] for row in qrels}
    corpus, extra = [], 0
    for doc in _jsonl(data / "corpus.jsonl"):
        if doc["_id"] in gold or (extra < others and (doc.get("text") or "").strip()):
            extra += doc["_id"] not in gold
            corpus.append(doc)
    out = scratch_dir("ragline-smoke-") / f"{data.name}-smoke"
    out.mkdir()
    (out / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in chosen), encoding="utf-8")
    (out / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in corpus), encoding="utf-8")
    (out / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join("\t".join(row) + "\n" for row in qrels), encoding="utf-8")
    if answers is not None:
        (out / "answers.jsonl").write_text("".join(json.dumps(answers[q["_id"]]) + "\n" for q in chosen), encoding="utf-8")
    return out


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


def stop(process: subprocess.Popen[bytes], grace_s: float = 30) -> None:
    """Ask a server to stop (SIGTERM: it drains as in production), and kill it if it has not within `grace_s`."""
    process.terminate()
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


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
