"""Redis clients from the store's URL (plain, Sentinel, Cluster), and Redis errors as the store's failures."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from store.base import StoreUnavailable

SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")


def sentinel_hosts(url: str) -> list[tuple[str, int]]:
    """The sentinels of a `redis+sentinel://h:p[,h:p]/service[/db]` URL."""
    netloc = urlparse(url).netloc.split("@")[-1]
    return [(h.rsplit(":", 1)[0], int(h.rsplit(":", 1)[1]) if ":" in h else 26379) for h in netloc.split(",")]


def text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def connect(url: str, *, blocking: bool = False, max_connections: int | None = None) -> Any:
    """`redis://`, `rediss://`, `redis+sentinel://h:p[,h:p]/service[/db]`, `redis+cluster://h:p`."""
    timeouts: dict[str, Any] = {"socket_connect_timeout": 2.0, "socket_timeout": None if blocking else 5.0}
    if not urlparse(url).scheme.endswith("+cluster"):  # a Cluster client retries (and re-routes) on its own
        # A command on a connection that broke (its server restarted, failed over, or closed it while idle) goes once
        # more on a new one: every store command is idempotent, fenced or carries a nonce. A timeout is not retried.
        timeouts["retry"] = Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,))
    if max_connections is not None:
        timeouts["max_connections"] = max_connections
    parsed = urlparse(url)
    if parsed.scheme in SENTINEL_SCHEMES:
        from redis.asyncio.sentinel import Sentinel

        hosts = sentinel_hosts(url)
        parts = [p for p in parsed.path.split("/") if p]
        service, db = parts[0], int(parts[1]) if len(parts) > 1 else 0
        sentinel = Sentinel(hosts, ssl=parsed.scheme.startswith("rediss"), **timeouts)
        return sentinel.master_for(service, db=db, password=parsed.password, **timeouts)
    if parsed.scheme in CLUSTER_SCHEMES:
        from redis.asyncio.cluster import RedisCluster

        return RedisCluster.from_url(url.replace("+cluster", "", 1), **timeouts)
    return aioredis.from_url(url, **timeouts)


def unavailable(exc: RedisError) -> StoreUnavailable:
    """A Redis error as the store's failure; retryable where the command may not have run."""
    retryable = isinstance(exc, (RedisConnectionError, RedisTimeoutError))
    return StoreUnavailable(f"redis: {type(exc).__name__}", retryable=retryable)
