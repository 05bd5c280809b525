"""The deployment of benchmarks/ingest_under_load.py: a scripted model process (answers and
pseudo-random embeddings), Redis 8, one `ragline serve` that runs no jobs, and `ragline worker`s."""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import redis
from harness import ROOT, scripted_env, tree_cpu_s

from tests.api.live import ProcessServer
from tests.redis_server import RedisServer
from tests.scripted_model import Reply, ScriptedModel

DIM = 384
BENCHMARK = Path(__file__).with_name("ingest_under_load.py")  # run with --model, it is the model process

# --- the model process ---


def pseudo_vector(text: str) -> list[float]:
    """A unit vector of DIM dimensions that depends only on the text (no model: see the module docstring)."""
    seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
    vector = np.random.default_rng(seed).standard_normal(DIM)
    return (vector / np.linalg.norm(vector)).tolist()


def serve_model(tokens: int, rate: float) -> None:
    model = ScriptedModel()
    model.default = Reply.text(" ".join(f"word{i}" for i in range(tokens)), chunk_delay=1 / rate)
    model.on_embedding(Reply(vectors=pseudo_vector))
    model.start()
    print(model.base_url, flush=True)
    while True:
        time.sleep(3600)


def start_model(tokens: int, rate: float) -> tuple[subprocess.Popen[str], str]:
    """The model in its own process (its pacing must not share a GIL with the measuring client)."""
    process = subprocess.Popen([sys.executable, str(BENCHMARK), "--model", "--tokens", str(tokens), "--rate", str(rate)],
                               cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    if not url.startswith("http"):
        process.kill()
        raise RuntimeError("the model process did not start")
    return process, url


# --- the deployment ---

SLOW_US = 5000  # Redis is single-threaded: a command this long delays every chat request behind it


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


@dataclass(frozen=True)
class SlowCommand:
    command: str  # the command line as SLOWLOG keeps it (its first words)
    ms: float


class Deployment:
    """Redis, the model, one `ragline serve` and the workers of the current phase; stopped in reverse order."""

    def __init__(self, args: argparse.Namespace, root: Path) -> None:
        self.root = root
        self.redis = RedisServer().start()
        self.client = redis.Redis.from_url(self.redis.url)
        self.model, model_url = start_model(args.tokens, args.rate)
        self.env = {
            **scripted_env(model_url), "RAGLINE_REDIS_URL": self.redis.url,
            "RAGLINE_EMBEDDING_MODEL": "openai/scripted-embed", "RAGLINE_EMBEDDING_API_BASE": model_url,
            "RAGLINE_EMBEDDING_API_KEY": "k", "RAGLINE_SERVE_RUNS_JOBS": "false",
            "RAGLINE_RATE_LIMIT_PER_MINUTE": "0",  # the client posts N uploads at once: not what a key limit is for
        }
        self.server = ProcessServer(self.data_env("serve"), log=root / "serve.log").start(timeout=180)
        self.workers: list[subprocess.Popen[bytes]] = []
        self.env["RAGLINE_WORKER_NICE"] = str(args.worker_nice)  # the worker lowers its own priority (worker_nice)

    def data_env(self, name: str) -> dict[str, str]:
        data_dir = self.root / f"data-{name}"
        data_dir.mkdir(exist_ok=True)
        return {**self.env, "RAGLINE_DATA_DIR": str(data_dir)}

    def start_workers(self, count: int, timeout_s: float = 180) -> None:
        """`count` workers, returned once each serves the queue: a phase's clock must not count their start-up."""
        before = self.registered_workers()
        for _ in range(count):
            name = f"worker-{len(self.workers)}"
            with open(self.root / f"{name}.log", "ab") as log:
                command = [sys.executable, "-m", "ragline", "worker", "--log-level", "warning"]
                env = {**os.environ, **self.data_env(name)}
                self.workers.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log))
        deadline = time.monotonic() + timeout_s
        while len(self.registered_workers() - before) < count:
            if time.monotonic() > deadline or any(w.poll() is not None for w in self.workers):
                raise RuntimeError(f"the workers did not start (logs under {self.root})")
            time.sleep(0.2)

    def registered_workers(self) -> set[str]:
        # saq writes one worker_info key per worker when it starts serving (and refreshes it): the
        # only outside sign that a worker's imports and connections are done
        return {key.decode() for key in self.client.scan_iter("saq:*:worker_info:*")}

    def stop_workers(self) -> None:
        for worker in self.workers:
            worker.terminate()
        for worker in self.workers:
            try:
                worker.wait(timeout=20)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
        self.workers = []

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds used so far by each part: serve, the live workers, Redis, the model process."""
        assert self.server.process is not None and self.redis._process is not None
        return {"serve": tree_cpu_s(self.server.process.pid), "workers": sum(tree_cpu_s(w.pid) for w in self.workers),
                "redis": tree_cpu_s(self.redis._process.pid), "model": tree_cpu_s(self.model.pid)}

    def watch_slow_commands(self, slower_than_us: int = SLOW_US) -> None:
        """From now on Redis logs every command slower than `slower_than_us` (its SLOWLOG)."""
        self.client.config_set("slowlog-log-slower-than", slower_than_us)
        self.client.config_set("slowlog-max-len", 10_000)
        self.client.slowlog_reset()

    def slow_commands(self) -> list[SlowCommand]:
        """What Redis logged since watch_slow_commands: a command that long holds every other client back."""
        return [SlowCommand(_text(entry["command"])[:60], entry["duration"] / 1000) for entry in self.client.slowlog_get(10_000)]

    def stop(self) -> None:
        self.stop_workers()
        self.server.stop()
        self.model.kill()
        self.model.wait()
        self.client.close()
        self.redis.stop()
