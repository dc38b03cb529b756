"""Thread state stores behind one seam: `memory`, `file` (embedded default); `open_store` picks one from a URL."""

from store.base import Admission, AdmitResult, CancelResult, Rejected, RenewResult, StoreUnavailable, ThreadStore
from store.records import Execution, PendingInterrupt, ThreadState


def open_store(spec: str, *, state_dir: str, retention_seconds: float, lease_seconds: float = 10.0) -> ThreadStore:
    """`memory`, `file` (or `file:///path`), or Redis: `redis://`, `rediss://`, `redis+sentinel://`, `redis+cluster://`."""
    if spec == "memory":
        from store.memory import MemoryStore

        return MemoryStore(retention_seconds=retention_seconds)
    if spec == "file" or spec.startswith("file://"):
        from store.file import FileStore

        directory = spec[len("file://") :] if spec.startswith("file://") else state_dir
        return FileStore(directory, retention_seconds=retention_seconds)
    if spec.split("://", 1)[0] in ("redis", "rediss", "redis+sentinel", "rediss+sentinel", "redis+cluster", "rediss+cluster"):
        from store.redis import RedisStore

        return RedisStore(spec, retention_seconds=retention_seconds, lease_seconds=lease_seconds)
    raise ValueError(f"unknown store {spec!r}: use 'file', 'file:///path', 'memory' or a redis:// URL")


__all__ = [
    "Admission",
    "AdmitResult",
    "CancelResult",
    "Execution",
    "PendingInterrupt",
    "Rejected",
    "RenewResult",
    "StoreUnavailable",
    "ThreadState",
    "ThreadStore",
    "open_store",
]
