"""Thread state stores behind one seam: `memory`, `file` (embedded default), `redis`; `open_store` picks one from a URL."""

import time

from store.base import (
    Admission,
    AdmitResult,
    Adopted,
    CancelResult,
    CancelStatus,
    Clock,
    HistoryWrite,
    LatestRun,
    Lease,
    Progress,
    Rejected,
    Rejection,
    RenewResult,
    StopResult,
    StoreUnavailable,
    ThreadHistory,
    ThreadStore,
)
from store.records import Execution, ExecutionStatus, PendingInterrupt, QueuedRun, ThreadState

REDIS_SCHEMES = ("redis", "rediss", "redis+sentinel", "rediss+sentinel", "redis+cluster", "rediss+cluster")


def open_store(
    spec: str,
    *,
    state_dir: str,
    retention_seconds: float,
    lease_seconds: float = 10.0,
    clock: Clock = time.time,
    redis_max_connections: int = 64,
    log_retention: float = 600.0,
    redis_min_replicas: int = 0,
    redis_wire: bool = True,
) -> ThreadStore:
    """`memory`, `file` (or `file:///path`), or Redis: `redis://`, `rediss://`, `redis+sentinel://`, `redis+cluster://`.

    `clock` is the memory and file stores' time; Redis always uses its server's clock. `log_retention`: how long the
    event log of an ended run is kept for replay. `redis_wire`: the scripts pipelined on one connection (the tuning
    annex's: store/redis/wire.py), else each goes through redis-py's own call."""
    if spec == "memory":
        from store.memory import MemoryStore

        return MemoryStore(retention_seconds=retention_seconds, clock=clock, log_retention=log_retention)
    if spec == "file" or spec.startswith("file://"):
        from store.file import FileStore

        directory = spec[len("file://") :] if spec.startswith("file://") else state_dir
        return FileStore(directory, retention_seconds=retention_seconds, clock=clock, log_retention=log_retention)
    if spec.split("://", 1)[0] in REDIS_SCHEMES:
        from store.redis import RedisStore

        return RedisStore(
            spec,
            retention_seconds=retention_seconds,
            lease_seconds=lease_seconds,
            max_connections=redis_max_connections,
            log_retention=log_retention,
            min_replicas=redis_min_replicas,
            wire=redis_wire,
        )
    raise ValueError(
        f"--store {spec!r} (AGUI_GATEWAY_STORE) is not a store: use 'file', 'file:///path', 'memory', or redis://, rediss://, "
        "redis+sentinel:// or redis+cluster:// URLs"
    )


__all__ = [
    "Admission",
    "AdmitResult",
    "Adopted",
    "CancelResult",
    "CancelStatus",
    "Clock",
    "Execution",
    "ExecutionStatus",
    "HistoryWrite",
    "LatestRun",
    "Lease",
    "PendingInterrupt",
    "Progress",
    "QueuedRun",
    "Rejected",
    "Rejection",
    "RenewResult",
    "StopResult",
    "StoreUnavailable",
    "ThreadHistory",
    "ThreadState",
    "ThreadStore",
    "open_store",
]
