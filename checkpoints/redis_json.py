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

import contextlib
import copy
import json
from collections import OrderedDict
from typing import Any

import orjson
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.redis.jsonplus_redis import JsonPlusRedisSerializer
from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.commands.json import AsyncJSON

from ragline import defaults


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


def _json_commands(client: Redis, encoder: Any, decoder: Any) -> AsyncJSON:
    """The client's JSON commands, made once: each AsyncJSON registers its reply callbacks on the
    client again (2% of a serving replica's samples when made per command, as redis-py does)."""
    if encoder is not ENCODER or decoder is not DECODER:
        return AsyncJSON(client=client, encoder=encoder, decoder=decoder)
    commands = client.__dict__.get("_orjson_commands")
    if commands is None:
        commands = client.__dict__["_orjson_commands"] = AsyncJSON(client=client, encoder=encoder, decoder=decoder)
    return commands


class OrjsonPipeline(Pipeline):
    opened_by: OrjsonRedis | None = None  # the client that opened it

    def json(self, encoder: Any = ENCODER, decoder: Any = DECODER) -> AsyncJSON:  # type: ignore[override]  # redis-py types it as the sync JSON
        if self.opened_by is None or encoder is not ENCODER or decoder is not DECODER:
            return _json_commands(self, encoder, decoder)
        # The client's commands, sending through this pipeline. A pipeline is new for every
        # checkpoint write, and making its own commands re-registered their reply callbacks each
        # time (3.5% of a Redis-backed replica's samples under load); the pipeline reads replies
        # with its client's callback table, where the client's commands registered them once.
        commands = copy.copy(_json_commands(self.opened_by, encoder, decoder))
        commands.client, commands.execute_command = self, self.execute_command
        return commands


class OrjsonRedis(Redis):
    """redis.asyncio.Redis, with orjson in its JSON commands and in those of its pipelines."""

    def json(self, encoder: Any = ENCODER, decoder: Any = DECODER) -> AsyncJSON:  # type: ignore[override]  # redis-py types it as the sync JSON
        return _json_commands(self, encoder, decoder)

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None) -> OrjsonPipeline:
        pipe = OrjsonPipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)
        pipe.opened_by = self
        return pipe


def message_caching_serializer(allowed_json_modules: list[tuple[str, ...]], allowed_msgpack_modules: list[tuple[str, str]],
                               cache_size: int = defaults.CHECKPOINT_MESSAGE_CACHE) -> JsonPlusRedisSerializer:
    """The Redis checkpointer's serializer, encoding each conversation message once, not at every step.

    Every checkpoint holds the whole state, so a turn's 10-15 checkpoints each encode every message
    of the session again (LangChain's `to_json`, per message): a plain-chat turn cost 21 ms of CPU
    in a 10-turn session and 164 ms in a 100-turn one, most of it this. A message in the state is
    never changed in place (add_messages replaces it by id with a new object), so its encoded form is
    kept by object identity, checked against the content it had, in a bounded LRU cache.

    Reading is the mirror image: every load of a thread revived every message again (a pydantic
    object each, after an import lookup of its class). A message's envelope, as its exact JSON,
    now maps to the object revived from it, so a message is revived once per process, and the
    object it gives is the one the encoding cache then recognises.
    """
    return _MessageCachingSerializer(cache_size, allowed_json_modules=allowed_json_modules,
                                     allowed_msgpack_modules=allowed_msgpack_modules)


class _MessageCachingSerializer(JsonPlusRedisSerializer):
    def __init__(self, cache_size: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cache_size = cache_size
        self._messages: OrderedDict[int, tuple[BaseMessage, Any, Any]] = OrderedDict()  # id -> (message, content, encoded)
        self._revived: OrderedDict[bytes, BaseMessage] = OrderedDict()  # an envelope's exact JSON -> its message

    def _default_handler(self, obj: Any) -> Any:
        if not isinstance(obj, BaseMessage):
            return super()._default_handler(obj)
        hit = self._messages.get(id(obj))
        if hit is not None and hit[0] is obj and hit[1] is obj.content:
            with contextlib.suppress(KeyError):  # another thread evicted it meanwhile
                self._messages.move_to_end(id(obj))
            return hit[2]
        encoded = super()._default_handler(obj)
        self._messages[id(obj)] = (obj, obj.content, encoded)  # holding the message keeps its id from being reused
        _bound(self._messages, self.cache_size)
        return encoded

    def _revive_if_needed(self, obj: Any) -> Any:
        if not (isinstance(obj, dict) and obj.get("type") == "constructor" and "messages" in (obj.get("id") or ())):
            return super()._revive_if_needed(obj)
        key = orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
        hit = self._revived.get(key)
        if hit is not None:
            with contextlib.suppress(KeyError):
                self._revived.move_to_end(key)
            return hit
        revived = super()._revive_if_needed(obj)
        if isinstance(revived, BaseMessage):
            self._revived[key] = revived
            _bound(self._revived, self.cache_size)
        return revived


def _bound(cache: OrderedDict[Any, Any], size: int) -> None:
    while len(cache) > size:
        with contextlib.suppress(KeyError):  # another thread evicted meanwhile
            cache.popitem(last=False)
