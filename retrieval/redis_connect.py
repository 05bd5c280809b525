"""One checked connection to the shared Redis: version 8 (or Stack) with the search module.

Shared by the Redis catalog, vector store and keyword index: a server without FT.* would accept
the writes and fail only at the first search, so the check runs when the stack is built.
"""

from __future__ import annotations

import redis

from ragline.retrieval.errors import RetrievalError


def connect_search(url: str) -> redis.Redis:
    """A sync client (raw bytes) on `url`, refused unless the server answers and has the search module."""
    client = redis.Redis.from_url(url)
    try:
        modules = {m[b"name"].decode().lower() for m in client.execute_command("MODULE", "LIST")}
    except redis.RedisError as exc:
        raise RetrievalError(f"cannot reach Redis at {url}: {exc}") from exc
    if "search" not in modules:
        raise RetrievalError(f"Redis at {url} has no search module (FT.*): use Redis 8 or Redis Stack")
    return client
