"""Thread state stores behind one seam: `memory`, `file` (embedded default); `open_store` picks one from a URL."""

from store.base import Admission, AdmitResult, CancelResult, Rejected, StoreUnavailable, ThreadStore
from store.records import Execution, PendingInterrupt, ThreadState


def open_store(spec: str, *, state_dir: str, retention_seconds: float) -> ThreadStore:
    """`memory`, `file` (or `file:///path`)."""
    if spec == "memory":
        from store.memory import MemoryStore

        return MemoryStore(retention_seconds=retention_seconds)
    if spec == "file" or spec.startswith("file://"):
        from store.file import FileStore

        directory = spec[len("file://") :] if spec.startswith("file://") else state_dir
        return FileStore(directory, retention_seconds=retention_seconds)
    raise ValueError(f"unknown store {spec!r}: use 'file', 'file:///path' or 'memory'")


__all__ = [
    "Admission",
    "AdmitResult",
    "CancelResult",
    "Execution",
    "PendingInterrupt",
    "Rejected",
    "StoreUnavailable",
    "ThreadState",
    "ThreadStore",
    "open_store",
]
