"""Embedded default store: one JSON file per thread, loaded on demand and replaced atomically (tmp, fsync, rename)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import time

import msgspec

from store.base import Clock, StoreUnavailable
from store.document import DocumentStore
from store.eventlog.file import FileEventLog
from store.records import ThreadState

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(ThreadState)
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def thread_file_name(thread_id: str) -> str:
    """A safe, bounded file name for any thread id: readable prefix plus a hash (no traversal, no reserved names)."""
    readable = _UNSAFE.sub("_", thread_id)[:40]
    digest = hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"t-{readable}-{digest}.json"


class FileStore(DocumentStore):
    """Single-process: several gateways must not share one state directory (use Redis for that)."""

    def __init__(
        self,
        directory: str,
        retention_seconds: float,
        *,
        clock: Clock = time.time,
        lease_seconds: float | None = None,
        log_retention: float = 600.0,
    ) -> None:
        super().__init__(retention_seconds, clock=clock, lease_seconds=lease_seconds)
        self.directory = os.path.abspath(directory)
        self.threads_dir = os.path.join(self.directory, "threads")
        os.makedirs(self.threads_dir, mode=0o700, exist_ok=True)
        for path in (self.directory, self.threads_dir):
            os.chmod(path, 0o700)
        self.events = FileEventLog(os.path.join(self.directory, "events"), log_retention, clock=clock)

    def _path(self, thread_id: str) -> str:
        return os.path.join(self.threads_dir, thread_file_name(thread_id))

    def _read(self, thread_id: str) -> ThreadState | None:
        try:
            with open(self._path(thread_id), "rb") as handle:
                raw = handle.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreUnavailable(f"cannot read thread state: {exc.strerror}") from None
        try:
            state = _decoder.decode(raw)
        except msgspec.MsgspecError:
            raise StoreUnavailable("thread state file is corrupt") from None
        if state.thread_id != thread_id:
            raise StoreUnavailable("thread state file belongs to another thread")
        return state

    def _write(self, thread_id: str, state: ThreadState) -> None:
        path = self._path(thread_id)
        tmp = f"{path}.{os.getpid()}.{time.monotonic_ns()}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, _encoder.encode(state))
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
            dir_fd = os.open(self.threads_dir, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError as exc:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise StoreUnavailable(f"cannot write thread state: {exc.strerror}") from None

    async def _load(self, thread_id: str) -> ThreadState | None:
        return await asyncio.to_thread(self._read, thread_id)

    async def _save(self, thread_id: str, state: ThreadState) -> None:
        await asyncio.to_thread(self._write, thread_id, state)

    def _purge(self, now: float) -> int:
        removed = 0
        cutoff = now - self.retention_seconds
        for entry in os.scandir(self.threads_dir):
            try:
                if entry.is_file() and entry.stat().st_mtime < cutoff:
                    os.unlink(entry.path)
                    removed += 1
            except OSError:
                continue
        return removed

    async def purge_expired(self) -> int:
        await self.events.purge_expired()
        return await asyncio.to_thread(self._purge, self.clock())

    async def ping(self) -> bool:
        return os.access(self.threads_dir, os.W_OK)
