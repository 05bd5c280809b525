"""A Redis client whose RedisJSON commands encode and decode with orjson instead of the stdlib.

Why: langgraph-checkpoint-redis writes every checkpoint with JSON.SET and reads it with JSON.GET
through redis-py's JSON commands, which use `json.JSONEncoder` / `json.JSONDecoder`. Under a
knowledge-chat load, that stdlib encoding alone was the largest single item of a replica's CPU
(7% of `ragline serve`'s samples, py-spy, benchmarks/ingest_under_load.py's baseline): a turn
writes a checkpoint per stage, each holding the whole state. orjson does the same work several
times faster and gives the same JSON for what the saver stores (plain dicts and lists that came
out of orjson.loads). A value orjson cannot encode (an integer beyond 64 bits) still goes through
the stdlib, so nothing that worked before fails now.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.commands.json import AsyncJSON


class OrjsonEncoder:
    """The `encode` redis-py's JSON commands call."""

    _fallback = json.JSONEncoder()

    def encode(self, value: Any) -> bytes | str:
        try:
            return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
        except TypeError:  # e.g. an int beyond 64 bits, which the stdlib writes as is
            return self._fallback.encode(value)


class OrjsonDecoder:
    """The `decode` redis-py's JSON commands call; a TypeError makes redis-py try its other forms."""

    def decode(self, raw: Any) -> Any:
        if not isinstance(raw, bytes | str):
            raise TypeError(f"not a JSON document: {type(raw).__name__}")
        return orjson.loads(raw)  # invalid JSON raises orjson.JSONDecodeError, a json.JSONDecodeError


ENCODER, DECODER = OrjsonEncoder(), OrjsonDecoder()


class OrjsonPipeline(Pipeline):
    def json(self, encoder: Any = ENCODER, decoder: Any = DECODER) -> AsyncJSON:  # type: ignore[override]  # redis-py types it as the sync JSON
        return AsyncJSON(client=self, encoder=encoder, decoder=decoder)


class OrjsonRedis(Redis):
    """redis.asyncio.Redis, with orjson in its JSON commands and in those of its pipelines."""

    def json(self, encoder: Any = ENCODER, decoder: Any = DECODER) -> AsyncJSON:  # type: ignore[override]  # redis-py types it as the sync JSON
        return AsyncJSON(client=self, encoder=encoder, decoder=decoder)

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None) -> OrjsonPipeline:
        return OrjsonPipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)
