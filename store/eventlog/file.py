"""Event logs as files under the state directory: one append-only file of `<position> <json>` lines per run
and a small JSON meta file, so a run's events survive a restart of the process (not a power loss: no fsync)."""

from __future__ import annotations

import asyncio
import os
import time

import msgspec

from store.base import Clock, StoreUnavailable
from store.eventlog import TOMBSTONE_SECONDS, Entry, EventLog, LogMeta, LogRead, LogRef, ref_digest

ABANDONED_SECONDS = 86400.0  # a log never ended (its process died) is removed after this long without writes


class _Meta(msgspec.Struct):
    ros_digest: str
    request_digest: str
    owner: str
    execution_id: str = ""
    first: int = 1
    ended_at: float | None = None
    head: int = 0


_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(_Meta).decode


class FileEventLog(EventLog):
    def __init__(self, directory: str, retention_seconds: float, *, clock: Clock = time.time) -> None:
        self.directory = directory
        self.retention_seconds = retention_seconds
        self.clock = clock
        os.makedirs(directory, mode=0o700, exist_ok=True)
        self._kept: dict[LogRef, int] = {}  # live runs: the first position their bounds keep (recorded at the end)
        self._meta: dict[LogRef, _Meta] = {}

    def _paths(self, ref: LogRef) -> tuple[str, str]:
        base = os.path.join(self.directory, ref_digest(ref))
        return base + ".log", base + ".meta"

    def _write_meta(self, path: str, meta: _Meta) -> None:
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as handle:
            handle.write(_encode(meta))
        os.replace(tmp, path)

    async def _io(self, work: object, *args: object) -> object:
        try:
            return await asyncio.to_thread(work, *args)  # type: ignore[arg-type]
        except OSError as exc:
            raise StoreUnavailable(f"event log: {exc.strerror}") from None

    async def create(self, ref: LogRef, meta: LogMeta) -> None:
        record = _Meta(meta.ros_digest, meta.request_digest, meta.owner, meta.execution_id)
        self._meta[ref] = record
        log_path, meta_path = self._paths(ref)
        await self._io(self._create, log_path, meta_path, record)

    def _create(self, log_path: str, meta_path: str, record: _Meta) -> None:
        os.close(os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
        self._write_meta(meta_path, record)

    async def append(self, ref: LogRef, entries: list[Entry], first_kept: int) -> None:
        log_path, meta_path = self._paths(ref)
        lines = b"".join(b"%d %s\n" % (position, data) for position, data in entries)
        meta = self._meta.get(ref)  # its `first` is the first position still in the file
        self._kept[ref] = first_kept
        head = entries[-1][0] if entries else first_kept
        compact = meta is not None and first_kept - meta.first > max(1024, head - first_kept)
        await self._io(self._append, log_path, meta_path, lines, first_kept if compact else 0, meta)

    def _append(self, log_path: str, meta_path: str, lines: bytes, compact_to: int, meta: _Meta | None) -> None:
        with open(log_path, "ab") as handle:
            handle.write(lines)
        if compact_to and meta is not None:
            kept = [line for line in _lines(log_path) if int(line.split(b" ", 1)[0]) >= compact_to]
            tmp = f"{log_path}.{os.getpid()}.tmp"
            with open(tmp, "wb") as handle:
                handle.write(b"".join(kept))
            os.replace(tmp, log_path)
            meta.first = compact_to
            self._write_meta(meta_path, meta)

    async def end(self, ref: LogRef, head: int) -> None:
        meta = self._meta.pop(ref, None)
        kept = self._kept.pop(ref, 1)
        if meta is None:
            return
        meta.ended_at, meta.head, meta.first = self.clock(), head, max(meta.first, kept)
        await self._io(self._write_meta, self._paths(ref)[1], meta)

    async def read(self, ref: LogRef, after: int, limit: int) -> LogRead | None:
        result = await self._io(self._read, ref, after, limit)
        return result if isinstance(result, LogRead) else None

    def _read(self, ref: LogRef, after: int, limit: int) -> LogRead | None:
        log_path, meta_path = self._paths(ref)
        try:
            with open(meta_path, "rb") as handle:
                meta = _decode(handle.read())
        except FileNotFoundError:
            return None
        except msgspec.MsgspecError:
            raise StoreUnavailable("event log meta file is corrupt") from None
        info = LogMeta(meta.ros_digest, meta.request_digest, meta.owner, meta.execution_id)
        if meta.ended_at is not None and meta.ended_at + self.retention_seconds <= self.clock():
            return LogRead(info, [], meta.head + 1, True)  # a tombstone: the events expired
        try:
            lines = _lines(log_path)
        except FileNotFoundError:
            lines = []
        entries: list[Entry] = []
        first = None
        for line in lines:
            head, _, data = line.rstrip(b"\n").partition(b" ")
            position = int(head)
            if position < meta.first or not line.endswith(b"\n"):  # trimmed, or torn by a crash mid-write
                continue
            first = position if first is None else first
            if position > after and len(entries) < limit:
                entries.append((position, data))
        return LogRead(info, entries, first if first is not None else after + 1, meta.ended_at is not None)

    async def purge_expired(self) -> int:
        result = await self._io(self._purge, self.clock())
        return result if isinstance(result, int) else 0

    def _purge(self, now: float) -> int:
        removed = 0
        for entry in os.scandir(self.directory):
            if not entry.name.endswith(".meta"):
                continue
            try:
                with open(entry.path, "rb") as handle:
                    meta = _decode(handle.read())
                log_path = entry.path[: -len(".meta")] + ".log"
                expired = meta.ended_at is not None and meta.ended_at + self.retention_seconds <= now
                buried = meta.ended_at is not None and meta.ended_at + TOMBSTONE_SECONDS <= now
                abandoned = meta.ended_at is None and os.stat(log_path).st_mtime + ABANDONED_SECONDS <= now
            except (OSError, msgspec.MsgspecError):
                continue
            for path in (log_path,) if expired else ():
                _unlink(path)
            if buried or abandoned:
                _unlink(entry.path)
                _unlink(log_path)
                removed += 1
        return removed


def _lines(path: str) -> list[bytes]:
    with open(path, "rb") as handle:
        return handle.readlines()


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
