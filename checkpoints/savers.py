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
        yield saver
