"""Checkpointer factory: durable runs, history, fork and rewind.

memory (default for one-shot runs) or SQLite (a file: survives restarts) on one machine; the
Redis saver for several replicas is added by the service. Every saver gets a serializer whose
msgpack allow-list names our state classes, so nothing else is ever unpickled from a checkpoint.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from ragline.graph.state import checkpoint_types

REDIS_MAX_CONNECTIONS = 256  # per process and client; commands queue for a connection beyond it


def serializer() -> JsonPlusSerializer:
    return JsonPlusSerializer(allowed_msgpack_modules=[(t.__module__, t.__name__) for t in checkpoint_types()])


def memory_saver() -> InMemorySaver:
    return InMemorySaver(serde=serializer())


@asynccontextmanager
async def sqlite_saver(path: Path) -> AsyncIterator[BaseCheckpointSaver]:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    path.parent.mkdir(parents=True, exist_ok=True)
    async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
        saver.serde = serializer()
        await saver.setup()  # tables now, not at the first write: a delete may come first
        yield saver


def redis_serializer() -> JsonPlusSerializer:
    """langgraph-checkpoint-redis stores JSON (RedisJSON); the same allow-list, in its two forms."""
    from langgraph.checkpoint.redis.jsonplus_redis import JsonPlusRedisSerializer

    types = checkpoint_types()
    # A run cancelled mid-node (a replica shutting down) leaves its task's CancelledError as an error
    # write; exceptions are never revived (they load as None), listing it only keeps the log quiet.
    cancelled = [("asyncio", "exceptions", "CancelledError")]
    return JsonPlusRedisSerializer(
        allowed_json_modules=[(*t.__module__.split("."), t.__name__) for t in types] + cancelled,
        allowed_msgpack_modules=[(t.__module__, t.__name__) for t in types],
    )


@asynccontextmanager
async def redis_saver(url: str) -> AsyncIterator[BaseCheckpointSaver]:
    """langgraph-checkpoint-redis: needs Redis 8 (or Redis Stack) with the search and JSON modules."""
    from langgraph.checkpoint.redis.aio import AsyncRedisSaver
    from redis.asyncio import BlockingConnectionPool, Redis

    # a blocking pool: under a burst of concurrent runs a write waits for a connection instead of failing
    client = Redis(connection_pool=BlockingConnectionPool.from_url(url, max_connections=REDIS_MAX_CONNECTIONS, timeout=30))
    try:
        async with AsyncRedisSaver.from_conn_string(redis_client=client) as saver:
            saver.serde = redis_serializer()
            yield saver
    finally:
        await client.aclose()
