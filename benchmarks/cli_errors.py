"""How fast the command line answers a mistake, and how fast Ctrl-C ends a long ingestion.

    .venv/bin/python benchmarks/cli_errors.py [--repeat 5]

Each case runs `ragline ...` as a user does (a fresh process, a fresh data directory with one
knowledge base) and times it from start to exit; the table gives the median and the slowest of
the repeats. The Ctrl-C row starts `ragline ingest` on a long generated document, sends SIGINT
once embedding has begun, and times from the signal to the process's exit. Nothing is
pass/fail: it prints a table (the goal is under a second for every row).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import parse_args

CASES = [
    ("unknown knowledge base (ask)", ["ask", "--kb", "no-such-kb", "q"]),
    ("unknown knowledge base (ingest)", ["ingest", "README.md", "--kb", "no-such-kb"]),
    ("unknown knowledge base (search)", ["search", "q", "--kb", "no-such-kb"]),
    ("missing file (ingest)", ["ingest", "/no/such/file.md", "--kb", "manuals"]),
    ("empty question (ask)", ["ask", " "]),
    ("question too long (ask)", ["ask", "x" * 40_000]),
    ("bad option value (ask)", ["ask", "q", "--max-tokens", "0"]),
    ("unknown command", ["no-such-command"]),
]
WORDS = ("sensor", "battery", "kettle", "station", "pairing", "warranty", "humidity", "wind", "display", "firmware", "reset", "signal")



def _ragline(args: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "ragline", *args], capture_output=True, env=env, timeout=120)
    return time.perf_counter() - started


def _ctrl_c(env: dict[str, str], folder: Path) -> float:
    rng = random.Random(7)
    long = folder / "long.txt"
    long.write_text("\n\n".join(" ".join(rng.choice(WORDS) for _ in range(100)) + "." for _ in range(400)))
    child = subprocess.Popen([sys.executable, "-m", "ragline", "ingest", str(long), "--kb", "manuals"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert child.stderr is not None
    child.stderr.readline()  # "[1/1] long.txt": parsing and embedding begin
    time.sleep(2.0)
    sent = time.perf_counter()
    child.send_signal(signal.SIGINT)
    child.communicate(timeout=300)
    return time.perf_counter() - sent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    options = parse_args(parser, repeat=1)
    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, "RAGLINE_DATA_DIR": scratch}
        subprocess.run([sys.executable, "-m", "ragline", "kb", "create", "manuals"], check=True, capture_output=True, env=env)
        rows = [(label, [_ragline(args, env) for _ in range(options.repeat)]) for label, args in CASES]
        rows.append(("Ctrl-C during ingest (signal to exit)", [_ctrl_c(env, Path(scratch)) for _ in range(min(3, options.repeat))]))
    print(f"{'case':<40} {'median s':>9} {'max s':>7}")
    for label, times in rows:
        print(f"{label:<40} {statistics.median(times):>9.2f} {max(times):>7.2f}")


if __name__ == "__main__":
    main()
