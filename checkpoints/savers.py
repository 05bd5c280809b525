"""Checkpointer factory: durable runs, history, fork and rewind.

memory (default for one-shot runs) or SQLite (a file: survives restarts) on one machine; the
Redis saver for several replicas is added by the service. Every saver gets a serializer whose
msgpack allow-list names our state classes, so nothing else is ever unpickled from a checkpoint.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from ragline.contracts.state import checkpoint_types
from ragline.redis_clients import async_pool


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
    from ragline.checkpoints.redis_json import message_caching_serializer

    types = checkpoint_types()
    # A run cancelled mid-node (a replica shutting down) leaves its task's CancelledError as an error
    # write; exceptions are never revived (they load as None), listing it only keeps the log quiet.
    cancelled: list[tuple[str, ...]] = [("asyncio", "exceptions", "CancelledError")]
    return message_caching_serializer(
        allowed_json_modules=[(*t.__module__.split("."), t.__name__) for t in types] + cancelled,
        allowed_msgpack_modules=[(t.__module__, t.__name__) for t in types],
    )


def _missing_index(exc: Exception) -> bool:
    return "no such index" in str(exc).lower()


def _root_namespace_only(config: Any) -> Any:
    """The config with an explicit root namespace ("") made a filter. The Redis saver treats an empty
    namespace as "any", so a thread's history would mix in the checkpoints of its subgraphs (the
    progress cards, graph/cards.py), and a resume could read a card's checkpoint as the turn's."""
    from langgraph.checkpoint.redis.util import EMPTY_STRING_SENTINEL

    configurable = (config or {}).get("configurable") or {}
    if configurable.get("checkpoint_ns", None) != "":
        return config
    return {**config, "configurable": {**configurable, "checkpoint_ns": EMPTY_STRING_SENTINEL}}


def _self_healing_saver() -> Any:
    """AsyncRedisSaver that recreates its search indexes when Redis came back empty, then retries once."""
    from langgraph.checkpoint.redis.aio import AsyncRedisSaver

    class SelfHealingRedisSaver(AsyncRedisSaver):
        async def aget_tuple(self, config: Any) -> Any:
            try:
                return await super().aget_tuple(config)
            except Exception as exc:  # redis' ResponseError, or redisvl's RedisSearchError around it
                if not _missing_index(exc):
                    raise
                await self.asetup()
                return await super().aget_tuple(config)

        async def alist(self, config: Any, **kwargs: Any) -> AsyncIterator[Any]:
            config = _root_namespace_only(config)
            try:
                items = [item async for item in super().alist(config, **kwargs)]
            except Exception as exc:
                if not _missing_index(exc):
                    raise
                await self.asetup()
                items = [item async for item in super().alist(config, **kwargs)]
            for item in items:
                yield item

    return SelfHealingRedisSaver


@asynccontextmanager
async def redis_saver(url: str) -> AsyncIterator[BaseCheckpointSaver]:
    """langgraph-checkpoint-redis: needs Redis 8 (or Redis Stack) with the search and JSON modules."""
    from ragline.checkpoints.redis_json import OrjsonRedis

    client = OrjsonRedis(connection_pool=async_pool(url))  # orjson in JSON.SET/GET: checkpoints/redis_json.py
    try:
        async with _self_healing_saver().from_conn_string(redis_client=client) as saver:
            saver.serde = redis_serializer()
            yield saver
    finally:
        await client.aclose()
