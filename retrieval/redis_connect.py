"""One checked connection to the shared Redis: version 8 (or Stack) with the search module.

Shared by the Redis catalog, vector store and keyword index: a server without FT.* would accept
the writes and fail only at the first search, so the check runs when the stack is built.
"""

from __future__ import annotations

import redis

from ragline import defaults
from ragline.retrieval.errors import RetrievalError


def connect_search(url: str) -> redis.Redis:
    """A sync client (raw bytes) on `url`, refused unless the server answers and has the search module."""
    # bounded waits: a paused or overloaded Redis fails a request with 503 after the timeout, never hangs it
    client = redis.Redis.from_url(url, socket_timeout=defaults.REDIS_SOCKET_TIMEOUT_S,
                                  socket_connect_timeout=defaults.REDIS_CONNECT_TIMEOUT_S)
    try:
        modules = {m[b"name"].decode().lower() for m in client.execute_command("MODULE", "LIST")}
    except redis.RedisError as exc:
        raise RetrievalError(f"cannot reach Redis at {url}: {exc}") from exc
    if "search" not in modules:
        raise RetrievalError(f"Redis at {url} has no search module (FT.*): use Redis 8 or Redis Stack")
    return client


def out_of_memory(exc: BaseException | None) -> bool:
    """Whether Redis refused a write at maxmemory, anywhere in the exception's chain (wrapped by a
    store's own error, or inside a Lua script's)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, redis.exceptions.OutOfMemoryError) or "OOM command not allowed" in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False

