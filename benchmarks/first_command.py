"""The README's first command from scratch, as a newcomer runs it, phase by phase.

    python3 benchmarks/first_command.py [--repo PATH] [--keep DIR] [--warm-cache]

Clones the repository into a temporary directory and runs the first line of the README's first
bash block there, exactly as written (venv, pip install, `ragline serve --sample`), with pip's
cache and Ragline's data directory inside the temporary directory, so nothing from an earlier
install helps (`--warm-cache` uses pip's usual cache instead). From the command's own output and
the server's answers it times each phase:

- download: from the start until pip begins building wheels (resolving, downloading, preparing
  llama-cpp-python's metadata);
- compile: building the wheels, llama-cpp-python's compilation of llama.cpp above all;
- install: pip installing the packages;
- first index: from pip's end until `/health` answers (start-up and indexing the sample);
- first answer: the README's question through the OpenAI-compatible API, streamed, to its first
  token and to its end (the local model's one-time loading included).

`--serve-only` (what `--smoke` runs) clones and reads the command the same way, but skips the venv
and pip: it runs the command's last step, `.venv/bin/ragline serve --sample`, with the ragline of
the environment running this script, and answers with at most 16 tokens. Its pip rows read "-".

Stdlib only (harness.py is too): it runs on the machine's own python3 before any venv exists.
Nothing here is pass/fail; it prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from harness import parse_args

QUESTION = "How long does pairing the Aurora sensor take?"
ROOT = Path(__file__).resolve().parent.parent


def first_command(readme: Path) -> str:
    lines, block = [], 0
    for line in readme.read_text(encoding="utf-8").splitlines():
        if line.startswith("```bash"):
            block += 1
            continue
        if line.startswith("```") and block == 1:
            break
        if block == 1 and line.strip():
            lines.append(line)
    return lines[0]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Marks:
    """The first time each pattern shows in the command's output, in seconds from the start."""

    PATTERNS = {
        "build_started": re.compile(r"Building (wheel|editable) for "),
        "install_started": re.compile(r"^Installing collected packages"),
        "pip_done": re.compile(r"^Successfully installed"),
    }

    def __init__(self, started: float, log: Path) -> None:
        self.started = started
        self.seen: dict[str, float] = {}
        self.log = log.open("w", encoding="utf-8")

    def feed(self, line: str) -> None:
        elapsed = time.perf_counter() - self.started
        self.log.write(f"{elapsed:8.1f} {line}")
        self.log.flush()
        for name, pattern in self.PATTERNS.items():
            if name not in self.seen and pattern.search(line.strip()):
                self.seen[name] = elapsed


def wait_healthy(url: str, process: subprocess.Popen[str], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def serve_step(command: str) -> str:
    """The command's last step, `.venv/bin/ragline serve ...`, with this environment's ragline."""
    last = command.split(" && ")[-1].strip()
    if not last.startswith(".venv/bin/ragline serve"):
        raise SystemExit(f"the README's first command no longer ends in `.venv/bin/ragline serve ...` ({last!r}): --serve-only cannot run it")
    return str(Path(sys.executable).parent) + "/" + last.removeprefix(".venv/bin/")


def ask(base: str, max_tokens: int | None = None) -> tuple[float, float, str]:
    """Seconds to the first streamed token and to the end, and the answer's text."""
    fields: dict[str, object] = {"model": "ragline/kb/sample", "stream": True, "messages": [{"role": "user", "content": QUESTION}]}
    if max_tokens:
        fields["max_tokens"] = max_tokens
    body = json.dumps(fields)
    request = urllib.request.Request(f"{base}/v1/chat/completions", data=body.encode(), headers={"content-type": "application/json"})
    started = time.perf_counter()
    first, text = float("nan"), ""
    with urllib.request.urlopen(request, timeout=900) as response:
        for raw in response:
            line = raw.decode("utf-8").strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            delta = json.loads(line[5:])["choices"][0].get("delta", {}).get("content") or ""
            if delta and not text:
                first = time.perf_counter() - started
            text += delta
    return first, time.perf_counter() - started, text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", default=str(ROOT), help="the repository to clone (default: this one)")
    parser.add_argument("--keep", help="work in this directory and keep it (default: a temporary one, removed)")
    parser.add_argument("--warm-cache", action="store_true", help="use pip's usual cache, not an empty one")
    parser.add_argument("--serve-only", action="store_true", help="skip the venv and pip: serve with this environment's ragline")
    parser.add_argument("--max-tokens", type=int, help="cap the answer (default: the model's own limit)")
    args = parse_args(parser, serve_only=True, max_tokens=16)

    work = Path(args.keep or tempfile.mkdtemp(prefix="ragline-first-"))
    work.mkdir(parents=True, exist_ok=True)
    checkout = work / "ragline"
    started = time.perf_counter()
    subprocess.run(["git", "clone", "-q", args.repo, str(checkout)], check=True)
    cloned = time.perf_counter() - started
    command = first_command(checkout / "README.md")
    if args.serve_only:
        command = serve_step(command)
    port = free_port()
    env = dict(os.environ, RAGLINE_PORT=str(port), RAGLINE_DATA_DIR=str(work / "data"), PYTHONUNBUFFERED="1")
    if not args.warm_cache:
        env["PIP_CACHE_DIR"] = str(work / "pip-cache")
    print(f"$ {command}\n(in {checkout}; log: {work / 'command.log'})", flush=True)

    marks = Marks(time.perf_counter(), work / "command.log")
    process = subprocess.Popen(["bash", "-c", command], cwd=checkout, env=env, text=True, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, start_new_session=True)
    output = process.stdout
    assert output is not None

    def read() -> None:
        for line in output:
            marks.feed(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        while "pip_done" not in marks.seen and process.poll() is None and not args.serve_only:
            time.sleep(0.5)
        if args.serve_only:
            marks.seen.update(dict.fromkeys(("build_started", "install_started", "pip_done"), 0.0))
        elif "pip_done" not in marks.seen:
            print(f"the command ended ({process.returncode}) before pip finished; see {work / 'command.log'}")
            return 1
        healthy = wait_healthy(f"http://127.0.0.1:{port}/health", process, timeout=900)
        served = time.perf_counter() - marks.started
        if not healthy:
            print(f"ragline serve did not become healthy; see {work / 'command.log'}")
            return 1
        first_token, answered, text = ask(f"http://127.0.0.1:{port}", args.max_tokens)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)
        marks.log.close()

    seen = marks.seen
    build = seen.get("build_started", seen["install_started"])
    rows = [
        ("clone", cloned),
        ("download (resolve, fetch, metadata)", build),
        ("compile (build wheels)", seen["install_started"] - build),
        ("install", seen["pip_done"] - seen["install_started"]),
        ("first index (serve --sample until /health)", served - seen["pip_done"]),
        ("first answer: first token", first_token),
        ("first answer: complete", answered),
    ]
    total = cloned + served + answered
    width = max(len(name) for name, _ in rows)
    print(f"\n{'phase':<{width}}  seconds")
    skipped = ("download", "compile", "install") if args.serve_only else ()
    for name, seconds in rows:
        print(f"{name:<{width}}  {'-' if name.startswith(skipped) else f'{seconds:.1f}':>7}")
    print(f"{'total: clone to a served answer':<{width}}  {total:7.1f}  ({total / 60:.1f} min)")
    print(f"\nanswer: {text.strip()[:200]}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
