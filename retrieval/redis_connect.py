"""One checked connection to the shared Redis: version 8 (or Stack) with the search module.

Shared by the Redis catalog, vector store and keyword index: a server without FT.* would accept
the writes and fail only at the first search, so the check runs when the stack is built.
"""

from __future__ import annotations

import redis

from ragline.redis_clients import sync_client
from ragline.retrieval.errors import RetrievalError


def connect_search(url: str) -> redis.Redis:
    """A sync client (raw bytes) on `url`, refused unless the server answers and has the search module."""
    client = sync_client(url)  # bounded waits: a paused Redis fails a request with 503 after the timeout, never hangs it
    try:
        modules = {m[b"name"].decode().lower() for m in client.execute_command("MODULE", "LIST")}
    except redis.RedisError as exc:
        raise RetrievalError(f"cannot reach Redis at {url}: {exc}") from exc
    if "search" not in modules:
        raise RetrievalError(f"Redis at {url} has no search module (FT.*): use Redis 8 or Redis Stack")
    return client
