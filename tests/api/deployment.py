"""A shared deployment made of real processes: one Redis 8 (started by the test), `ragline serve`
replicas and `ragline worker`s, each with its own empty data directory, models scripted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.api.live import ROOT, ProcessServer
from tests.redis_server import RedisServer
from tests.scripted_model import ScriptedModel


def env_of(redis: RedisServer, scripted: ScriptedModel, data_dir: Path, api_keys: dict[str, str] | None = None) -> dict[str, str]:
    return {
        **({"RAGLINE_API_KEYS": json.dumps(api_keys)} if api_keys else {}),
        "RAGLINE_REDIS_URL": redis.url, "RAGLINE_DATA_DIR": str(data_dir),  # checkpoints, streams, catalog, vectors: Redis
        "RAGLINE_EMBEDDING_MODEL": "openai/scripted-embed", "RAGLINE_EMBEDDING_API_BASE": scripted.base_url,
        "RAGLINE_EMBEDDING_API_KEY": "scripted-key", "RAGLINE_EMBEDDING_BATCH_SIZE": "1",
        "RAGLINE_CHAT_MODEL": "openai/scripted", "RAGLINE_CHAT_API_BASE": scripted.base_url, "RAGLINE_CHAT_API_KEY": "scripted-key",
        "RAGLINE_SERVE_RUNS_JOBS": "false",  # only the workers ingest
        "RAGLINE_JOB_HEARTBEAT_S": "5", "RAGLINE_JOB_SWEEP_S": "1",  # 5 s: a loaded 2-core machine stalls a live worker for seconds
        "RAGLINE_SSE_HEARTBEAT_S": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }


class Worker:
    """`python -m ragline worker` in a subprocess, its output in a log file."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = log
        with open(log, "ab") as out:
            self.process = subprocess.Popen([sys.executable, "-m", "ragline", "worker", "--log-level", "warning"], cwd=ROOT,
                                            env={**os.environ, **env}, stdout=out, stderr=out)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()


class Deployment:
    """Everything the test started, stopped in reverse order whatever happens."""

    def __init__(self, redis: RedisServer, scripted: ScriptedModel, root: Path, api_keys: dict[str, str] | None = None) -> None:
        self.redis, self.scripted, self.root, self.api_keys = redis, scripted, root, api_keys
        self.started: list[ProcessServer | Worker] = []
        self.data_dirs: dict[str, Path] = {}

    def env(self, name: str) -> dict[str, str]:
        data_dir = self.root / f"data-{name}"
        data_dir.mkdir()  # empty: nothing is shared through disk
        self.data_dirs[name] = data_dir
        return env_of(self.redis, self.scripted, data_dir, self.api_keys)

    def replica(self, name: str) -> ProcessServer:
        server = ProcessServer(self.env(name), log=self.root / f"{name}.log")
        self.started.append(server)
        return server.start(timeout=120)

    def worker(self, name: str) -> Worker:
        worker = Worker(self.env(name), self.root / f"{name}.log")
        self.started.append(worker)
        return worker

    def stop(self) -> None:
        for process in reversed(self.started):
            process.stop()
