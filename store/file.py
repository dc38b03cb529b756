"""Embedded default store: one JSON file per thread, loaded on demand and replaced atomically (tmp, flush, rename,
flush the directory), with group commit: writes that wait together share the flushes."""

from __future__ import annotations

import asyncio
import ctypes
import hashlib
import os
import re
import time
from collections import OrderedDict
from collections.abc import Callable

import msgspec

from store.base import Clock, StoreUnavailable
from store.document import DocumentStore
from store.eventlog.file import FileEventLog
from store.lane import IoLane
from store.records import ThreadState

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(ThreadState)
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
WRITTEN_KEPT = 4096  # threads whose last written bytes are kept, to load them without reading the file


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
        self._pending: list[tuple[str, bytes, asyncio.Future[None]]] = []  # writes waiting for the next batch
        self._written: OrderedDict[str, bytes] = OrderedDict()  # thread -> its file's bytes, newest last
        self._lane = IoLane()
        self._committer: asyncio.Task[None] | None = None

    def _path(self, thread_id: str) -> str:
        return os.path.join(self.threads_dir, thread_file_name(thread_id))

    def _read(self, thread_id: str) -> bytes | None:
        try:
            with open(self._path(thread_id), "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreUnavailable(f"cannot read thread state: {exc.strerror}") from None

    @staticmethod
    def _decode(thread_id: str, raw: bytes) -> ThreadState:
        try:
            state = _decoder.decode(raw)
        except msgspec.MsgspecError:
            raise StoreUnavailable("thread state file is corrupt") from None
        if state.thread_id != thread_id:
            raise StoreUnavailable("thread state file belongs to another thread")
        return state

    async def _load(self, thread_id: str) -> ThreadState | None:
        """From the bytes this process last wrote when it still has them (one process owns the directory), else
        from the file; decoded afresh each time, since the rules change the state they are given."""
        raw = self._written.get(thread_id)
        if raw is not None:
            self._written.move_to_end(thread_id)
        else:
            raw = await self._lane.call(self._read, thread_id)
            if raw is None:
                return None
        return self._decode(thread_id, raw)

    async def _save(self, thread_id: str, state: ThreadState) -> None:
        """Queue the write and wait until its batch is durable: writes that arrive while a batch is being made
        durable share the next one (group commit: one flush for all of them, whatever their number)."""
        done = asyncio.get_running_loop().create_future()
        data = _encoder.encode(state)
        self._written.pop(thread_id, None)  # until it is durable, the file is what counts
        self._pending.append((self._path(thread_id), data, done))
        if self._committer is None:
            self._committer = asyncio.create_task(self._commit_batches())
        await done
        self._written[thread_id] = data
        if len(self._written) > WRITTEN_KEPT:
            self._written.popitem(last=False)

    async def _commit_batches(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                failures = await asyncio.to_thread(_commit, self.threads_dir, [(path, data) for path, data, _ in batch])
                for path, _, done in batch:
                    if done.done():
                        continue
                    failure = failures.get(path)
                    if failure is None:
                        done.set_result(None)
                    else:
                        done.set_exception(StoreUnavailable(f"cannot write thread state: {failure}"))
        finally:
            self._committer = None

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
        self._written.clear()  # the purge removes files behind it
        return await asyncio.to_thread(self._purge, self.clock())

    async def ping(self) -> bool:
        return os.access(self.threads_dir, os.W_OK)


def _commit(directory: str, batch: list[tuple[str, bytes]]) -> dict[str, str]:
    """Make a batch of thread files durable together: every new content to its temporary file, one flush of them
    all, every rename, one flush of the directory. Returns the paths that failed, with why (the others succeeded).
    A crash at any point leaves each file either as it was or as written, never torn."""
    failures: dict[str, str] = {}
    written: list[tuple[str, str, int]] = []
    for path, data in batch:
        tmp = f"{path}.{os.getpid()}.{time.monotonic_ns()}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            failures[path] = exc.strerror or "error"
            continue
        try:
            os.write(fd, data)
            written.append((path, tmp, fd))
        except OSError as exc:
            os.close(fd)
            _discard(tmp)
            failures[path] = exc.strerror or "error"
    flushed = _flush_all(written, failures)
    renamed = []
    for path, tmp in flushed:
        try:
            os.replace(tmp, path)
            renamed.append(path)
        except OSError as exc:
            _discard(tmp)
            failures[path] = exc.strerror or "error"
    if renamed:
        try:
            dir_fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError as exc:
            for path in renamed:
                failures[path] = exc.strerror or "error"
    return failures


def _flush_all(written: list[tuple[str, str, int]], failures: dict[str, str]) -> list[tuple[str, str]]:
    """One filesystem flush (syncfs) for every file of the batch where Linux offers it, else one fsync each."""
    flushed: list[tuple[str, str]] = []
    if written and _syncfs is not None and _syncfs(written[0][2]) == 0:
        for path, tmp, fd in written:
            os.close(fd)
            flushed.append((path, tmp))
        return flushed
    for path, tmp, fd in written:
        try:
            os.fsync(fd)
            flushed.append((path, tmp))
        except OSError as exc:
            _discard(tmp)
            failures[path] = exc.strerror or "error"
        finally:
            os.close(fd)
    return flushed


def _discard(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except OSError:
        pass


def _load_syncfs() -> Callable[[int], int] | None:
    try:
        syncfs = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    syncfs.argtypes, syncfs.restype = [ctypes.c_int], ctypes.c_int
    return syncfs


_syncfs = _load_syncfs()
